package bundle

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"svc/agent"
)

// Format is the manifest's "format": the layout of the bundle described in the package
// documentation. A reader refuses any other value.
const Format = "svc-bundle/1"

// Paths inside a bundle.
const (
	manifestPath = "manifest.json"
	srcPrefix    = "src/"
	toolsPrefix  = "build/tools/"
	jsSuffix     = ".js"
)

// maxBundleSize bounds a bundle, compressed and unpacked: four times the default tree limit, room
// for the compiled JavaScript (with inline source maps) of trees at the limit.
const maxBundleSize = 4 * DefaultMaxTotalSize

// keyPattern matches the object key Key gives, capturing the hex digest.
var keyPattern = regexp.MustCompile(`^bundles/[^/]+/([0-9a-f]{64})\.tar\.zst$`)

// Key is the object key of a bundle of the agent slug whose bytes have digest ("sha256:<hex>", as
// Bundle.Digest and Pack's caller compute it): bundles/<slug>/<hex>.tar.zst. The same tree and
// origin give the same bytes, hence the same key, and Read checks the bytes against it.
func Key(slug, digest string) string {
	return "bundles/" + slug + "/" + strings.TrimPrefix(digest, "sha256:") + ".tar.zst"
}

// DigestOf returns "sha256:<hex>" of bundle bytes, the digest Key and Bundle.Digest use.
func DigestOf(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Manifest is the bundle's manifest.json. It holds no timestamps, so the same tree and inputs give
// the same bytes.
type Manifest struct {
	Format          string         `json:"format"`
	Digest          string         `json:"digest"` // Digest of the source tree
	Commit          string         `json:"commit"`
	Branch          string         `json:"branch"`
	SourceVersionID string         `json:"sourceVersionId"`
	Name            string         `json:"name"`
	Version         string         `json:"version"`
	Tools           []ManifestTool `json:"tools"`  // sorted by name
	Agents          []string       `json:"agents"` // named agents, sorted
	CreatedBy       string         `json:"createdBy"`
}

// ManifestTool describes one tool of a bundle; its JavaScript is build/tools/<name>.js.
type ManifestTool struct {
	Name      string `json:"name"`
	Execution string `json:"execution"` // inline | durable
	Layout    string `json:"layout"`    // handler | tool.ts
}

// Origin is where a bundle's tree came from, as its manifest records it.
type Origin struct {
	Commit          string
	Branch          string
	SourceVersionID string
}

// NewManifest is the manifest of a bundle of ag, loaded from a tree of the given Digest that came
// from origin.
func NewManifest(ag *agent.Agent, digest string, origin Origin) Manifest {
	m := Manifest{
		Format:          Format,
		Digest:          digest,
		Commit:          origin.Commit,
		Branch:          origin.Branch,
		SourceVersionID: origin.SourceVersionID,
		Name:            ag.Config.Name,
		Version:         ag.Config.Version,
		Tools:           []ManifestTool{},
		Agents:          sortedKeys(ag.Agents),
		CreatedBy:       "svc",
	}
	for _, name := range sortedKeys(ag.Tools) {
		t := ag.Tools[name]
		execution := "inline"
		if t.Durable() {
			execution = "durable"
		}
		m.Tools = append(m.Tools, ManifestTool{Name: name, Execution: execution, Layout: t.Layout})
	}
	return m
}

// Pack writes the bundle of tree, with js (tool name → compiled JavaScript) and manifest m: a tar
// archive (GNU format, entries in byte order of their names, regular files only, mode 0644, uid
// and gid 0, modification time 0) compressed with zstd in one frame. The same arguments give the
// same bytes. A bundle that would unpack to more than the bundle size limit is an error.
func Pack(tree *Tree, js map[string]string, m Manifest) ([]byte, error) {
	manifest, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	entries := make(map[string][]byte, len(tree.files)+len(js)+1)
	entries[manifestPath] = append(manifest, '\n')
	for p, data := range tree.files {
		entries[srcPrefix+p] = data
	}
	for name, code := range js {
		entries[toolsPrefix+name+jsSuffix] = []byte(code)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range sortedKeys(entries) {
		data := entries[name]
		hdr := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     name,
			Size:     int64(len(data)),
			Mode:     0o644,
			ModTime:  time.Unix(0, 0),
			Format:   tar.FormatGNU,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("pack %s: %w", name, err)
		}
		if _, err := tw.Write(data); err != nil {
			return nil, fmt.Errorf("pack %s: %w", name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("pack: %w", err)
	}
	if buf.Len() > maxBundleSize {
		return nil, fmt.Errorf("pack: the bundle unpacks to %d bytes, more than the limit of %d bytes (source and compiled tools)", buf.Len(), maxBundleSize)
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		return nil, fmt.Errorf("pack: zstd: %w", err)
	}
	out := enc.EncodeAll(buf.Bytes(), make([]byte, 0, buf.Len()/3))
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("pack: zstd: %w", err)
	}
	return out, nil
}

// Bundle is an unpacked bundle. Its fields are read-only.
type Bundle struct {
	// Digest is "sha256:<hex>" of the bundle bytes.
	Digest   string
	Manifest Manifest
	// Source is the source tree (the bundle's src/ folder).
	Source fs.FS
	// JS maps each tool name to its compiled JavaScript (build/tools/<name>.js).
	JS map[string]string
}

// Read reads and unpacks the bundle stored under key from r, the object's content (the caller
// opens it from its object store and closes it). When key has the form Key gives it, the bytes
// must hash to that digest, else the error wraps ErrBadBundle. Errors name the key.
func Read(r io.Reader, key string) (*Bundle, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxBundleSize+1))
	if err != nil {
		return nil, fmt.Errorf("open bundle %s: %w", key, err)
	}
	if len(data) > maxBundleSize {
		return nil, fmt.Errorf("open bundle %s: %w: more than %d bytes", key, ErrBadBundle, maxBundleSize)
	}
	if m := keyPattern.FindStringSubmatch(key); m != nil {
		if got := DigestOf(data); got != "sha256:"+m[1] {
			return nil, fmt.Errorf("open bundle %s: %w: content digest is %s", key, ErrBadBundle, got)
		}
	}
	b, err := Unpack(data)
	if err != nil {
		return nil, fmt.Errorf("open bundle %s: %w", key, err)
	}
	return b, nil
}

// Unpack unpacks bundle bytes, within size limits. It checks the layout, the manifest's format,
// that the source tree matches the manifest's digest and that there is JavaScript for exactly the
// tools the manifest lists; any failure wraps ErrBadBundle.
func Unpack(data []byte) (*Bundle, error) {
	if len(data) > maxBundleSize {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrBadBundle, maxBundleSize)
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxBundleSize))
	if err != nil {
		return nil, fmt.Errorf("read bundle: zstd: %w", err)
	}
	raw, err := dec.DecodeAll(data, nil)
	dec.Close()
	if err != nil {
		return nil, fmt.Errorf("%w: zstd: %w", ErrBadBundle, err)
	}
	b := &Bundle{Digest: DigestOf(data), JS: map[string]string{}}
	// The tree limits are the ones every build applied (a build cannot raise them), so any tree
	// a build accepted opens here; the bundle holds only its files, folders being implied.
	tree := NewTreeBuilder(DefaultLimits())
	var manifest []byte
	tr := tar.NewReader(bytes.NewReader(raw))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: tar: %w", ErrBadBundle, err)
		}
		if hdr.Typeflag != tar.TypeReg {
			return nil, fmt.Errorf("%w: entry %q is not a regular file", ErrBadBundle, hdr.Name)
		}
		switch name := hdr.Name; {
		case name == manifestPath:
			if manifest, err = io.ReadAll(tr); err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrBadBundle, name, err)
			}
		case strings.HasPrefix(name, srcPrefix):
			if err := tree.AddFile(strings.TrimPrefix(name, srcPrefix), hdr.Size, func() ([]byte, error) { return readExactly(tr, hdr.Size) }); err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrBadBundle, name, err)
			}
		case strings.HasPrefix(name, toolsPrefix) && strings.HasSuffix(name, jsSuffix) && !strings.Contains(name[len(toolsPrefix):], "/"):
			code, err := io.ReadAll(tr)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrBadBundle, name, err)
			}
			b.JS[strings.TrimSuffix(strings.TrimPrefix(name, toolsPrefix), jsSuffix)] = string(code)
		default:
			return nil, fmt.Errorf("%w: unexpected entry %q", ErrBadBundle, name)
		}
	}
	if manifest == nil {
		return nil, fmt.Errorf("%w: no %s", ErrBadBundle, manifestPath)
	}
	if err := json.Unmarshal(manifest, &b.Manifest); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadBundle, manifestPath, err)
	}
	if b.Manifest.Format != Format {
		return nil, fmt.Errorf("%w: %s: format %q, want %q", ErrBadBundle, manifestPath, b.Manifest.Format, Format)
	}
	src, err := tree.Finish()
	if err != nil {
		return nil, fmt.Errorf("%w: src: %w", ErrBadBundle, err)
	}
	if src.Digest() != b.Manifest.Digest {
		return nil, fmt.Errorf("%w: source digest %s differs from the manifest's %s", ErrBadBundle, src.Digest(), b.Manifest.Digest)
	}
	b.Source = src
	listed := make([]string, len(b.Manifest.Tools))
	for i, t := range b.Manifest.Tools {
		listed[i] = t.Name
	}
	slices.Sort(listed)
	if have := sortedKeys(b.JS); !slices.Equal(listed, have) {
		return nil, fmt.Errorf("%w: manifest lists tools %v, build/tools holds %v", ErrBadBundle, listed, have)
	}
	return b, nil
}

// Agent loads the bundle's source tree with agent.Load and sets each Tool.JS to the bundle's
// compiled JavaScript (the code that was built, not a fresh compile). It fails when the tree no
// longer loads or the tools differ from the bundle's JavaScript.
func (b *Bundle) Agent() (*agent.Agent, error) {
	ag, err := agent.Load(b.Source)
	if err != nil {
		return nil, fmt.Errorf("load bundle %s: %w", b.Digest, err)
	}
	for name, t := range ag.Tools {
		code, ok := b.JS[name]
		if !ok {
			return nil, fmt.Errorf("load bundle %s: %w: no build/tools/%s.js for tool %s", b.Digest, ErrBadBundle, name, name)
		}
		t.JS = code
	}
	for name := range b.JS {
		if _, ok := ag.Tools[name]; !ok {
			return nil, fmt.Errorf("load bundle %s: %w: build/tools/%s.js has no tool", b.Digest, ErrBadBundle, name)
		}
	}
	return ag, nil
}
