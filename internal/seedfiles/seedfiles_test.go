package seedfiles

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, body := range map[string]string{"b.txt": "B", "a.txt": "A", "c.json": "C"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "d.txt"), 0o755); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range Read(t, dir, ".txt") {
		got = append(got, string(b))
	}
	if !slices.Equal(got, []string{"A", "B"}) {
		t.Errorf("got %q, want the two .txt files in name order", got)
	}
}
