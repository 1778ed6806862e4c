#!/bin/sh
# Repairs a unit by creating its marker file; check.sh then finds it up.
touch "$MARKER_DIR/$1"
