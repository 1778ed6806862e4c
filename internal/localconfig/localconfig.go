// Package localconfig owns the reconciler machine's own configuration
// (DESIGN §9): the store URL and the repair channels. It is per machine and
// never stored in the shared store, and it is decoded as strictly as the
// policy: an unknown key or a wrong type is an error with line and column.
package localconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/stado/stado/internal/yamlstrict"
)

// Config is the local config file.
type Config struct {
	// Store is the store URL (a path, file:///path or s3://...).
	Store    string   `yaml:"store"`
	Channels Channels `yaml:"channels"`
}

// Channels configures how repairs reach hosts.
type Channels struct {
	Exec  ExecChannel  `yaml:"exec"`
	SSH   SSHChannel   `yaml:"ssh"`
	Local LocalChannel `yaml:"local"`
}

// ExecChannel runs a local command per action: an argv template in which
// {host}, {unit} and {service} are substituted as whole arguments.
type ExecChannel struct {
	Actions map[string][]string `yaml:"actions"`
}

// SSHChannel runs an action's argv on the host over OpenSSH.
type SSHChannel struct {
	User                  string              `yaml:"user"`
	Port                  int                 `yaml:"port"`
	IdentityFile          string              `yaml:"identity_file"`
	KnownHosts            string              `yaml:"known_hosts"`
	ConnectTimeoutSeconds int                 `yaml:"connect_timeout_seconds"`
	Actions               map[string][]string `yaml:"actions"`
	// Binary is the ssh client (default "ssh" on PATH).
	Binary string `yaml:"binary"`
}

// LocalChannel runs systemctl on the reconciler's own host.
type LocalChannel struct {
	// Systemctl is the systemctl binary (default "systemctl").
	Systemctl string `yaml:"systemctl"`
}

// Default returns the configuration used when no file exists.
func Default() *Config {
	return &Config{Channels: Channels{SSH: SSHChannel{Port: 22, ConnectTimeoutSeconds: 10}}}
}

// MaxSize is the largest config file accepted.
const MaxSize = 256 << 10

// actionName is what an action may be called.
var actionName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

// Parse decodes and validates a config document. Every problem is reported,
// each with its line and column.
func Parse(data []byte) (*Config, error) {
	if len(data) > MaxSize {
		return nil, yamlstrict.Errors{{Line: 1, Column: 1, Msg: fmt.Sprintf("the config is %d bytes, more than the %d allowed", len(data), MaxSize)}}.Err()
	}
	c := Default()
	pos, errs := yamlstrict.Decode(data, c)
	if pos == nil {
		return nil, errs.Err()
	}
	errs = append(errs, c.validate(pos)...)
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Config) validate(pos *yamlstrict.Positions) yamlstrict.Errors {
	var errs yamlstrict.Errors
	checkActions := func(channel string, actions map[string][]string) {
		for name, argv := range actions {
			path := "channels." + channel + ".actions." + name
			if !actionName.MatchString(name) {
				errs = append(errs, pos.Errorf(path, "action name %q must be lower-case letters, digits, '-' or '_', starting with a letter", name))
			}
			if len(argv) == 0 {
				errs = append(errs, pos.Errorf(path, "the command is empty: give the program and its arguments as a list, e.g. [\"/usr/local/bin/fleet-repair\", \"%s\", \"{host}\", \"{unit}\"]", name))
				continue
			}
			if argv[0] == "" {
				errs = append(errs, pos.Errorf(path, "the program (first element) is empty"))
			}
			if channel == "exec" && !strings.Contains(argv[0], "{") && !filepath.IsAbs(argv[0]) && strings.Contains(argv[0], "/") {
				errs = append(errs, pos.Errorf(path, "program %q is a relative path: use an absolute path or a bare name found on PATH", argv[0]))
			}
		}
	}
	checkActions("exec", c.Channels.Exec.Actions)
	checkActions("ssh", c.Channels.SSH.Actions)
	ssh := c.Channels.SSH
	if ssh.Port < 1 || ssh.Port > 65535 {
		errs = append(errs, pos.Errorf("channels.ssh.port", "must be between 1 and 65535; got %d", ssh.Port))
	}
	if ssh.ConnectTimeoutSeconds < 1 || ssh.ConnectTimeoutSeconds > 300 {
		errs = append(errs, pos.Errorf("channels.ssh.connect_timeout_seconds", "must be between 1 and 300 seconds; got %d", ssh.ConnectTimeoutSeconds))
	}
	if strings.HasPrefix(ssh.User, "-") {
		errs = append(errs, pos.Errorf("channels.ssh.user", "must not start with '-': it would be read as an ssh option"))
	}
	if len(ssh.Actions) > 0 && ssh.KnownHosts == "" {
		errs = append(errs, pos.Errorf("channels.ssh.known_hosts", "is required when ssh actions are configured: stado never connects without strict host-key checking"))
	}
	return errs
}

// Source says where a config came from.
type Source struct {
	// Path is the file read, or "" when none was found and defaults apply.
	Path string
}

// Load finds and reads the config: explicit (from --config) if given, else
// $STADO_CONFIG, else ~/.config/stado/config.yaml, else
// /etc/stado/config.yaml. An explicitly named file must exist; the
// well-known paths are optional. getenv is os.Getenv in production.
func Load(explicit string, getenv func(string) string) (*Config, Source, error) {
	var candidates []string
	required := false
	switch {
	case explicit != "":
		candidates, required = []string{explicit}, true
	case getenv("STADO_CONFIG") != "":
		candidates, required = []string{getenv("STADO_CONFIG")}, true
	default:
		if d := getenv("XDG_CONFIG_HOME"); d != "" && filepath.IsAbs(d) {
			candidates = append(candidates, filepath.Join(d, "stado", "config.yaml"))
		} else if h := getenv("HOME"); h != "" {
			candidates = append(candidates, filepath.Join(h, ".config", "stado", "config.yaml"))
		}
		candidates = append(candidates, "/etc/stado/config.yaml")
	}
	for _, p := range candidates {
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) && !required {
			continue
		}
		if err != nil {
			return nil, Source{}, fmt.Errorf("read config %s: %w", p, err)
		}
		c, err := Parse(data)
		if err != nil {
			return nil, Source{}, fmt.Errorf("config %s is invalid:\n%s", p, prefixLines(p, err))
		}
		return c, Source{Path: p}, nil
	}
	return Default(), Source{}, nil
}

// prefixLines puts the file name before each problem line, giving the
// FILE:LINE:COL form editors jump to.
func prefixLines(file string, err error) string {
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		lines[i] = file + ":" + l
	}
	return strings.Join(lines, "\n")
}
