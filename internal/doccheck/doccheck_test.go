package doccheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// root is the repository, two folders up.
const root = "../.."

func TestCommandsOf(t *testing.T) {
	md := "# Page\n\n" +
		"```sh\n" +
		"go build -o bin/detect ./cmd/detect\n" +
		"export KEYHEAT_ARCHIVE_ROOT=/var/lib/keyheat/archive   # a comment\n" +
		"export KEYHEAT_API_TOKEN=$(openssl rand -hex 16)\n" +
		"bin/detect replay --from=2026-01-02T14:00:00Z \\\n" +
		"  --json > reports.jsonl   # ignored\n" +
		"redis-cli monitor | bin/ingest stdin --ingest.format=redis\n" +
		"KEYHEAT_CONFIG=k.yaml go run ./cmd/ingest tail --from-start 'a b.log' && echo done\n" +
		"eval \"$(scripts/services.sh env)\"; go run ./cmd/detect demo 2>&1 | tee out\n" +
		"```\n\n" +
		"```\ndetect run --not-checked\n```\n\n" +
		"```console\n$ ingest gen --rate=1\nplanted key=x count=1\n```\n"
	got, err := CommandsOf("p.md", []byte(md))
	require.NoError(t, err)
	type short struct {
		Line int
		Prog string
		Args []string
		Env  []string
	}
	var s []short
	for _, c := range got {
		s = append(s, short{c.Line, c.Prog, c.Args, c.Env})
	}
	require.Equal(t, []short{
		{7, "detect", []string{"replay", "--from=2026-01-02T14:00:00Z", "--json"}, []string{"KEYHEAT_ARCHIVE_ROOT=/var/lib/keyheat/archive"}},
		{9, "ingest", []string{"stdin", "--ingest.format=redis"}, []string{"KEYHEAT_ARCHIVE_ROOT=/var/lib/keyheat/archive"}},
		{10, "ingest", []string{"tail", "--from-start", "a b.log"}, []string{"KEYHEAT_ARCHIVE_ROOT=/var/lib/keyheat/archive", "KEYHEAT_CONFIG=k.yaml"}},
		{11, "detect", []string{"demo"}, []string{"KEYHEAT_ARCHIVE_ROOT=/var/lib/keyheat/archive"}},
		{19, "ingest", []string{"gen", "--rate=1"}, nil},
	}, s)
	require.Equal(t, "bin/detect replay --from=2026-01-02T14:00:00Z  --json > reports.jsonl", got[0].Text)
}

func TestAnchors(t *testing.T) {
	a := Anchors([]byte("# keyheat\n## Keyed topics: `detect.keyed`\n## What the registry holds: hot, update, cooled, tombstone\n" +
		"```sh\n# not a heading\n```\n## Testing\n## Testing\n#nospace\n"))
	for _, want := range []string{"keyheat", "keyed-topics-detectkeyed", "what-the-registry-holds-hot-update-cooled-tombstone", "testing", "testing-1"} {
		require.True(t, a[want], "anchor %q missing from %v", want, a)
	}
	require.False(t, a["not-a-heading"])
	require.False(t, a["nospace"])
}

func TestLinksOf(t *testing.T) {
	md := "See [the map](../ARCHITECTURE.md) and ![pic](dashboard.png \"title\"),\n" +
		"[web](https://example.com), `[code](not/a/link)`, [here](#top).\n" +
		"```sh\necho [x](inside/code)\n```\n"
	var targets []string
	for _, l := range LinksOf("docs/p.md", []byte(md)) {
		targets = append(targets, l.Target)
	}
	require.Equal(t, []string{"../ARCHITECTURE.md", "dashboard.png", "#top"}, targets)
}

// TestCheckFindsBrokenLinks: Check refuses a missing file, a missing
// heading, and a link out of the repository.
func TestCheckFindsBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "docs"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README.md"), []byte("# Top\n## A b\n"), 0o644))
	for target, ok := range map[string]bool{
		"../README.md": true, "../README.md#a-b": true, "#here": true,
		"../README.md#nope": false, "missing.md": false, "../../outside.md": false, "../README.md#top-1": false,
	} {
		err := Check(dir, Link{File: "docs/p.md", Line: 1, Target: target})
		if target == "#here" {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "docs", "p.md"), []byte("## Here\n"), 0o644))
			err = Check(dir, Link{File: "docs/p.md", Line: 1, Target: target})
		}
		if ok {
			require.NoError(t, err, target)
		} else {
			require.Error(t, err, target)
		}
	}
}

// TestDocLinks: every relative link of README.md and docs/*.md points to
// a file of the repository, and every #fragment to a heading of it.
func TestDocLinks(t *testing.T) {
	links, err := Links(root)
	require.NoError(t, err)
	require.NotEmpty(t, links)
	var bad []string
	for _, l := range links {
		if err := Check(root, l); err != nil {
			bad = append(bad, err.Error())
		}
	}
	require.Empty(t, bad, "broken links:\n%s", strings.Join(bad, "\n"))
}

// TestEveryPageIsLinked: every docs page can be reached from the README.
func TestEveryPageIsLinked(t *testing.T) {
	files, err := Files(root)
	require.NoError(t, err)
	links, err := Links(root)
	require.NoError(t, err)
	linked := map[string]bool{}
	for _, l := range links {
		if l.File == "README.md" {
			target, _, _ := strings.Cut(l.Target, "#")
			linked[target] = true
		}
	}
	for _, f := range files[1:] {
		require.True(t, linked[f], "README.md links nowhere to %s", f)
	}
}

// TestReadmeBasics: the README shows the two commands a newcomer runs
// first, and names `make test`, what CI's .ci/run runs, as the test
// command.
func TestReadmeBasics(t *testing.T) {
	md, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	var shell []string
	for _, b := range Blocks(md) {
		if shellLangs[b.Lang] {
			shell = append(shell, b.Lines...)
		}
	}
	require.Contains(t, shell, "go run ./cmd/detect demo")
	require.Contains(t, shell, "make test")
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	require.NoError(t, err)
	require.Contains(t, string(ci), "make test")
}
