package composefile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v4"
)

// File is a parsed Compose file.
type File struct {
	// Dir is the folder of the file: relative bind-mount sources are
	// relative to it.
	Dir string
	// Services by name; each Service's Name is its key.
	Services map[string]*Service
	// Volumes are the names of the top-level named volumes.
	Volumes []string
}

// Service is one service of a Compose file.
type Service struct {
	Name        string
	Image       string
	Build       bool // has a build section
	Command     []string
	Environment map[string]string
	Ports       []Port
	Mounts      []Mount
	// DependsOn maps each service it depends on to the condition
	// (service_started when the short form names it).
	DependsOn   map[string]string
	Healthcheck *Healthcheck
}

// Port is one published port. HostPort 0 means Docker picks one.
type Port struct {
	HostIP        string
	HostPort      int
	ContainerPort int
	Protocol      string // tcp or udp
}

func (p Port) String() string {
	return fmt.Sprintf("%s:%d:%d/%s", p.HostIP, p.HostPort, p.ContainerPort, p.Protocol)
}

// Mount is one entry of a service's volumes.
type Mount struct {
	Type     string // bind or volume
	Source   string // a path for bind, a volume name for volume
	Target   string
	ReadOnly bool
}

// Healthcheck is a service's healthcheck: Test is its command, starting
// with CMD, CMD-SHELL or NONE.
type Healthcheck struct {
	Test    []string
	Disable bool
}

// Load reads the Compose file at path, interpolating ${VAR} forms with
// lookup (a variable lookup reports unset is unset: its default applies,
// and ${VAR:?message} is an error).
func Load(path string, lookup func(string) (string, bool)) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	text, err := interpolate(string(b), lookup)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var raw struct {
		Services map[string]rawService `yaml:"services"`
		Volumes  map[string]any        `yaml:"volumes"`
	}
	if err := yaml.Unmarshal([]byte(text), &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f := &File{Dir: filepath.Dir(path), Services: map[string]*Service{}}
	for name := range raw.Volumes {
		f.Volumes = append(f.Volumes, name)
	}
	slices.Sort(f.Volumes)
	var errs []error
	for name, rs := range raw.Services {
		s, err := rs.service(name)
		if err != nil {
			errs = append(errs, fmt.Errorf("service %s: %w", name, err))
			continue
		}
		f.Services[name] = s
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return f, nil
}

// Names returns the services' names, sorted.
func (f *File) Names() []string {
	var names []string
	for n := range f.Services {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// HostPath returns the host path that a bind mount of s shows at
// containerPath, and whether one does.
func (f *File) HostPath(s *Service, containerPath string) (path string, readOnly, ok bool) {
	for _, m := range s.Mounts {
		if m.Type != "bind" {
			continue
		}
		rel, err := filepath.Rel(m.Target, containerPath)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		src := m.Source
		if !filepath.IsAbs(src) {
			src = filepath.Join(f.Dir, src)
		}
		return filepath.Join(src, rel), m.ReadOnly, true
	}
	return "", false, false
}

type rawService struct {
	Image       string `yaml:"image"`
	Build       any    `yaml:"build"`
	Command     any    `yaml:"command"`
	Environment any    `yaml:"environment"`
	Ports       []any  `yaml:"ports"`
	Volumes     []any  `yaml:"volumes"`
	DependsOn   any    `yaml:"depends_on"`
	Healthcheck *struct {
		Test    any  `yaml:"test"`
		Disable bool `yaml:"disable"`
	} `yaml:"healthcheck"`
}

func (rs rawService) service(name string) (*Service, error) {
	s := &Service{Name: name, Image: rs.Image, Build: rs.Build != nil, Environment: map[string]string{}, DependsOn: map[string]string{}}
	var err error
	if s.Command, err = stringList("command", rs.Command); err != nil {
		return nil, err
	}
	switch env := rs.Environment.(type) {
	case nil:
	case map[string]any:
		for k, v := range env {
			s.Environment[k] = scalar(v)
		}
	case []any:
		for _, e := range env {
			k, v, _ := strings.Cut(scalar(e), "=")
			s.Environment[k] = v
		}
	default:
		return nil, fmt.Errorf("environment: want a mapping or a list, not %T", env)
	}
	for _, p := range rs.Ports {
		port, err := parsePort(p)
		if err != nil {
			return nil, fmt.Errorf("ports: %w", err)
		}
		s.Ports = append(s.Ports, port)
	}
	for _, v := range rs.Volumes {
		m, err := parseMount(v)
		if err != nil {
			return nil, fmt.Errorf("volumes: %w", err)
		}
		s.Mounts = append(s.Mounts, m)
	}
	switch d := rs.DependsOn.(type) {
	case nil:
	case []any:
		for _, n := range d {
			s.DependsOn[scalar(n)] = "service_started"
		}
	case map[string]any:
		for n, v := range d {
			cond := "service_started"
			if m, ok := v.(map[string]any); ok && m["condition"] != nil {
				cond = scalar(m["condition"])
			}
			s.DependsOn[n] = cond
		}
	default:
		return nil, fmt.Errorf("depends_on: want a list or a mapping, not %T", d)
	}
	if h := rs.Healthcheck; h != nil {
		test, err := stringList("healthcheck.test", h.Test)
		if err != nil {
			return nil, err
		}
		if len(test) > 0 && test[0] != "CMD" && test[0] != "CMD-SHELL" && test[0] != "NONE" {
			test = []string{"CMD-SHELL", strings.Join(test, " ")} // the string form
		}
		s.Healthcheck = &Healthcheck{Test: test, Disable: h.Disable || len(test) > 0 && test[0] == "NONE"}
	}
	return s, nil
}

// stringList reads a command: a list, or a string split at spaces.
func stringList(what string, v any) ([]string, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case string:
		if strings.ContainsAny(v, `"'\`) {
			return nil, fmt.Errorf("%s: a string with quotes; write it as a list", what)
		}
		return strings.Fields(v), nil
	case []any:
		out := make([]string, len(v))
		for i, e := range v {
			out[i] = scalar(e)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s: want a list or a string, not %T", what, v)
}

func scalar(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// parsePort reads "[IP:][HOST:]CONTAINER[/PROTOCOL]" or the long form.
func parsePort(v any) (Port, error) {
	p := Port{Protocol: "tcp"}
	if m, ok := v.(map[string]any); ok {
		p.HostIP = scalar(m["host_ip"])
		if proto := scalar(m["protocol"]); proto != "" {
			p.Protocol = proto
		}
		var err error
		if p.ContainerPort, err = portNumber(scalar(m["target"])); err != nil {
			return p, err
		}
		if pub := scalar(m["published"]); pub != "" {
			if p.HostPort, err = portNumber(pub); err != nil {
				return p, err
			}
		}
		return p, nil
	}
	s := scalar(v)
	if rest, proto, ok := strings.Cut(s, "/"); ok {
		s, p.Protocol = rest, proto
	}
	i := strings.LastIndex(s, ":")
	var err error
	if p.ContainerPort, err = portNumber(s[i+1:]); err != nil {
		return p, fmt.Errorf("%q: %w", v, err)
	}
	if i < 0 {
		return p, nil
	}
	s = s[:i]
	i = strings.LastIndex(s, ":")
	if p.HostPort, err = portNumber(s[i+1:]); err != nil {
		return p, fmt.Errorf("%q: %w", v, err)
	}
	if i >= 0 {
		p.HostIP = strings.Trim(s[:i], "[]")
	}
	return p, nil
}

func portNumber(s string) (int, error) {
	if strings.Contains(s, "-") {
		return 0, fmt.Errorf("port range %q: not read here; list the ports one by one", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("%q is not a port number", s)
	}
	return n, nil
}

// parseMount reads "SOURCE:TARGET[:ro]" or the long form.
func parseMount(v any) (Mount, error) {
	if m, ok := v.(map[string]any); ok {
		mt := Mount{Type: scalar(m["type"]), Source: scalar(m["source"]), Target: scalar(m["target"])}
		ro, _ := m["read_only"].(bool)
		mt.ReadOnly = ro
		if mt.Type != "bind" && mt.Type != "volume" {
			return mt, fmt.Errorf("%s: type %q: want bind or volume", mt.Target, mt.Type)
		}
		return mt, nil
	}
	parts := strings.Split(scalar(v), ":")
	if len(parts) < 2 || len(parts) > 3 {
		return Mount{}, fmt.Errorf("%q: want SOURCE:TARGET[:MODE]", v)
	}
	mt := Mount{Type: "volume", Source: parts[0], Target: parts[1]}
	if strings.HasPrefix(mt.Source, ".") || strings.HasPrefix(mt.Source, "/") || strings.HasPrefix(mt.Source, "~") {
		mt.Type = "bind"
	}
	if len(parts) == 3 {
		mt.ReadOnly = slices.Contains(strings.Split(parts[2], ","), "ro")
	}
	return mt, nil
}

var varRef = regexp.MustCompile(`\$(\$|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|[A-Za-z_{])`)

// interpolate replaces ${VAR} forms as Compose does, line by line, leaving
// comments alone.
func interpolate(text string, lookup func(string) (string, bool)) (string, error) {
	var errs []error
	lines := strings.Split(text, "\n")
	for n, line := range lines {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		lines[n] = varRef.ReplaceAllStringFunc(line, func(ref string) string {
			m := varRef.FindStringSubmatch(ref)
			switch {
			case m[1] == "$":
				return "$"
			case m[2] == "":
				errs = append(errs, fmt.Errorf("line %d: %q: only ${VAR} forms are read here", n+1, ref))
				return ref
			}
			val, set := lookup(m[2])
			op, arg := m[3], m[4]
			empty := !set || op != "" && op[0] == ':' && val == ""
			switch {
			case !empty:
				return val
			case strings.HasSuffix(op, "-"):
				return arg
			case strings.HasSuffix(op, "?"):
				errs = append(errs, fmt.Errorf("line %d: %s is required: %s", n+1, m[2], arg))
			}
			return ""
		})
	}
	return strings.Join(lines, "\n"), errors.Join(errs...)
}
