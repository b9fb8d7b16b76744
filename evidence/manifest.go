package evidence

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/tailgate-llm/tailgate/internal/atomicfile"
	"github.com/tailgate-llm/tailgate/results"
)

// ManifestSchema names manifest.json's format (results names the file,
// results.ManifestFile, and its signature, results.SignatureFile).
const ManifestSchema = "tailgate.manifest/v1"

// Manifest lists every file of an evidence directory except the manifest
// itself and its signature, sorted by path.
type Manifest struct {
	Schema string `json:"schema"`
	Files  []File `json:"files"`
}

// File is one manifest entry. Path is relative to the directory, with
// forward slashes.
type File struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// FileError says which file of an evidence directory is wrong and how.
type FileError struct {
	Path   string
	Reason string // "modified", "missing", "not in the manifest", ...
}

func (e *FileError) Error() string { return e.Path + ": " + e.Reason }

// Build hashes every regular file under dir (the manifest and signature
// excepted). Symbolic links and other non-regular files are errors: the
// evidence must be the files themselves.
func Build(dir string) (*Manifest, error) {
	m := &Manifest{Schema: ManifestSchema, Files: []File{}}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() || skip(rel) {
			return nil
		}
		if !d.Type().IsRegular() {
			return &FileError{Path: rel, Reason: "not a regular file (" + d.Type().String() + ")"}
		}
		f, err := hashFile(path)
		if err != nil {
			return err
		}
		f.Path = rel
		m.Files = append(m.Files, f)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(m.Files, func(i, j int) bool { return m.Files[i].Path < m.Files[j].Path })
	return m, nil
}

func skip(rel string) bool {
	return rel == results.ManifestFile || rel == results.SignatureFile
}

func hashFile(path string) (File, error) {
	f, err := os.Open(path)
	if err != nil {
		return File{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return File{}, fmt.Errorf("%s: %w", path, err)
	}
	return File{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// Marshal is the manifest's canonical bytes: indented JSON and a newline.
func (m *Manifest) Marshal() []byte {
	b, _ := json.MarshalIndent(m, "", "  ")
	return append(b, '\n')
}

// Write builds the manifest of dir and writes it to dir/manifest.json.
func Write(dir string) (*Manifest, error) {
	m, err := Build(dir)
	if err != nil {
		return nil, err
	}
	if err := writeAtomic(filepath.Join(dir, results.ManifestFile), m.Marshal()); err != nil {
		return nil, err
	}
	return m, nil
}

// Read parses dir/manifest.json.
func Read(dir string) (*Manifest, []byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, results.ManifestFile))
	if err != nil {
		return nil, nil, err
	}
	m, err := parseManifest(b)
	return m, b, err
}

func parseManifest(b []byte) (*Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: %w", results.ManifestFile, err)
	}
	if m.Schema != ManifestSchema {
		return nil, fmt.Errorf("%s: schema %q, want %q", results.ManifestFile, m.Schema, ManifestSchema)
	}
	for _, f := range m.Files {
		if f.Path == "" || filepath.IsAbs(f.Path) || strings.HasPrefix(filepath.Clean(filepath.FromSlash(f.Path)), "..") {
			return nil, fmt.Errorf("%s: bad path %q", results.ManifestFile, f.Path)
		}
	}
	return &m, nil
}

// Check re-hashes every file m lists and looks for files it does not
// list. The error is a *FileError naming the first file (in path order)
// that is modified, missing or extra.
func Check(dir string, m *Manifest) error {
	listed, err := checkFiles(dir, m.Files, func(want, got File) string {
		switch {
		case got.Size != want.Size:
			return fmt.Sprintf("modified: %d bytes, the manifest says %d", got.Size, want.Size)
		case got.SHA256 != want.SHA256:
			return "modified: SHA-256 " + got.SHA256 + ", the manifest says " + want.SHA256
		}
		return ""
	})
	if err != nil {
		return err
	}
	now, err := Build(dir)
	if err != nil {
		return err
	}
	for _, f := range now.Files {
		if !listed[f.Path] {
			return &FileError{Path: f.Path, Reason: "not in the manifest (added after it was made)"}
		}
	}
	return nil
}

// checkFiles re-hashes each file wanted, in order, and returns the first
// that is missing, not a regular file, or that differs (differs says how,
// "" when it does not), as a *FileError; listed holds every path wanted.
func checkFiles(dir string, files []File, differs func(want, got File) string) (listed map[string]bool, err error) {
	listed = map[string]bool{}
	for _, want := range files {
		listed[want.Path] = true
		p := filepath.Join(dir, filepath.FromSlash(want.Path))
		st, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &FileError{Path: want.Path, Reason: "missing"}
		}
		if err != nil {
			return nil, &FileError{Path: want.Path, Reason: err.Error()}
		}
		if !st.Mode().IsRegular() {
			return nil, &FileError{Path: want.Path, Reason: "not a regular file"}
		}
		got, err := hashFile(p)
		if err != nil {
			return nil, &FileError{Path: want.Path, Reason: err.Error()}
		}
		if why := differs(want, got); why != "" {
			return nil, &FileError{Path: want.Path, Reason: why}
		}
	}
	return listed, nil
}

func writeAtomic(path string, b []byte) error { return atomicfile.Write(path, b) }
