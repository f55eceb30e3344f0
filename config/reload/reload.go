package reload

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/keyheat/keyheat/config"
	"github.com/keyheat/keyheat/pipeline"
)

// Reloader takes the pipeline options of a changed configuration file,
// or refuses them with an error saying why: *detect.Service.
type Reloader interface {
	Reload(pipeline.Options) error
}

// settle is how long the file's folder must be quiet before the file is
// read again: one save is several events.
const settle = 250 * time.Millisecond

// Watch applies the rules of src.File to svc each time the file's content
// changes, until ctx ends, by the policy the package comment gives; src
// is what the command loaded its configuration from at start, so a
// reload reads the same flags and variables beside the new file. Without
// a file (src.File empty) it returns at once. When the file's folder
// cannot be watched it logs a warning (rules then reload only with a
// restart) and returns.
func Watch(ctx context.Context, src config.Source, svc Reloader, log *slog.Logger) {
	if src.File == "" {
		return
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := newPolicy(src, svc, log)
	if err := watchFile(ctx, src.File, settle, log, func() { p.changed() }); err != nil {
		log.Warn("config file not watched; rules reload only with a restart", "err", err)
	}
}

// policy decides, for each new content of the file, whether its rules
// replace those in force.
type policy struct {
	src config.Source
	svc Reloader
	log *slog.Logger
	// rulesInFile says whether the file in force sets pipeline.rules: a
	// new content that loses them is refused.
	rulesInFile bool
}

// newPolicy starts from the file as it is now, which the command loaded
// at start.
func newPolicy(src config.Source, svc Reloader, log *slog.Logger) *policy {
	p := &policy{src: src, svc: svc, log: log}
	if b, err := os.ReadFile(src.File); err == nil {
		_, p.rulesInFile, _ = fileRules(b)
	}
	return p
}

// changed applies the rules of the file as it is now, or keeps the rules
// in force and logs why; it reports whether it applied them.
func (p *policy) changed() bool {
	refuse := func(err error) bool {
		p.log.Error("config file changed but refused; the rules in force stay", "file", p.src.File, "err", err)
		return false
	}
	b, err := os.ReadFile(p.src.File)
	if err != nil {
		return refuse(fmt.Errorf("read config file: %w", err))
	}
	empty, hasRules, err := fileRules(b)
	switch {
	case err != nil:
		// config.Load below says where the syntax error is.
	case empty:
		return refuse(errors.New("the file is empty (caught while being written?); write the full config to change the rules"))
	case p.rulesInFile && !hasRules:
		return refuse(errors.New("the file no longer has pipeline.rules; write the rules wanted to change them (the default rule would replace them)"))
	}
	cfg, err := config.Load(config.CmdDetect, p.src)
	if err == nil {
		err = p.svc.Reload(cfg.Pipeline)
	}
	if err != nil {
		return refuse(err)
	}
	p.log.Info("rules reloaded", "file", p.src.File, "rules", len(cfg.Pipeline.Rules), "whitelist", len(cfg.Pipeline.Whitelist))
	p.rulesInFile = hasRules
	return true
}

// fileRules says whether the YAML config b sets nothing at all (empty, or
// comments only) and whether it has a pipeline.rules key.
func fileRules(b []byte) (empty, hasRules bool, err error) {
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return false, false, err
	}
	if len(doc) == 0 {
		return true, false, nil
	}
	p, _ := doc["pipeline"].(map[string]any)
	_, hasRules = p["rules"]
	return false, hasRules, nil
}
