package composefile

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// File is a loaded Compose file: the project as Compose sees it, with the
// views keyheat's tests read.
type File struct {
	// Project is the model compose-go loaded: validated against the
	// Compose schema, interpolated and normalised.
	Project *types.Project
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
	Type     string // bind, volume or tmpfs
	Source   string // an absolute path for bind, a volume name for volume
	Target   string
	ReadOnly bool
}

// Healthcheck is a service's healthcheck: Test is its command, starting
// with CMD, CMD-SHELL or NONE.
type Healthcheck struct {
	Test    []string
	Disable bool
}

// Load reads the Compose file at path as `docker compose config` would,
// with env as the only environment its ${VAR} forms see (nil: every
// variable unset, so their defaults apply; ${VAR:?message} with VAR unset
// is an error). No .env file is read.
func Load(path string, env []string) (*File, error) {
	opts, err := cli.NewProjectOptions([]string{path},
		cli.WithName("keyheat"),
		cli.WithEnv(env),
		cli.WithResolvedPaths(true),
		cli.WithDiscardEnvFile,
	)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f := &File{Project: p, Services: map[string]*Service{}}
	for name := range p.Volumes {
		f.Volumes = append(f.Volumes, name)
	}
	slices.Sort(f.Volumes)
	for name, sc := range p.Services {
		s, err := service(name, sc)
		if err != nil {
			return nil, fmt.Errorf("%s: service %s: %w", path, name, err)
		}
		f.Services[name] = s
	}
	return f, nil
}

func service(name string, sc types.ServiceConfig) (*Service, error) {
	s := &Service{
		Name:        name,
		Image:       sc.Image,
		Build:       sc.Build != nil,
		Command:     []string(sc.Command),
		Environment: map[string]string{},
		DependsOn:   map[string]string{},
	}
	for k, v := range sc.Environment {
		if v != nil {
			s.Environment[k] = *v
		} else {
			s.Environment[k] = "" // a bare name: taken from the host, unset here
		}
	}
	for _, pc := range sc.Ports {
		p := Port{HostIP: pc.HostIP, ContainerPort: int(pc.Target), Protocol: pc.Protocol}
		if p.Protocol == "" {
			p.Protocol = "tcp"
		}
		if pc.Published != "" {
			n, err := strconv.Atoi(pc.Published)
			if err != nil {
				return nil, fmt.Errorf("ports: published %q: list the ports one by one", pc.Published)
			}
			p.HostPort = n
		}
		s.Ports = append(s.Ports, p)
	}
	for _, v := range sc.Volumes {
		s.Mounts = append(s.Mounts, Mount{Type: v.Type, Source: v.Source, Target: v.Target, ReadOnly: v.ReadOnly})
	}
	for dep, d := range sc.DependsOn {
		s.DependsOn[dep] = d.Condition
	}
	if h := sc.HealthCheck; h != nil {
		s.Healthcheck = &Healthcheck{Test: []string(h.Test), Disable: h.Disable || len(h.Test) > 0 && h.Test[0] == "NONE"}
	}
	return s, nil
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
		if m.Type != types.VolumeTypeBind {
			continue
		}
		rel, err := filepath.Rel(m.Target, containerPath)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		return filepath.Join(m.Source, rel), m.ReadOnly, true
	}
	return "", false, false
}
