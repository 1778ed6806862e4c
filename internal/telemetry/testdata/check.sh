#!/bin/sh
test -e "$MARKER_DIR/$1"
