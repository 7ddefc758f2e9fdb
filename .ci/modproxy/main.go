// Command modproxy writes a file-based Go module proxy (GOPROXY=file://DIR)
// holding this repository's published modules at one version, built from
// the working tree: for each module, the .info, .mod and .zip files of that
// version and the list, as the module proxy protocol lays them out
// (https://go.dev/ref/mod#goproxy-protocol). Each go.mod is rewritten so
// that its requirements on the repository's other modules name that version,
// as .ci/release sets them before tagging. A go.mod with a replace directive
// is an error, not something to rewrite: `go install pkg@version` refuses
// such a module.
//
//	go run . -root ../.. -version v0.0.0-installcheck -out /tmp/proxy . render metrics/prometheus cmd/magpie
//
// The files of a module are those git would commit from its directory
// (tracked, and untracked ones not ignored), less the subtrees of nested
// modules, as the module zip of a tagged commit holds them. It lives in a
// module of its own so that golang.org/x/mod stays out of the library's
// go.mod.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"
)

func main() {
	root := flag.String("root", ".", "the repository's root directory")
	version := flag.String("version", "", "the version to publish every module at (required, canonical semver)")
	out := flag.String("out", "", "the proxy directory to write (required)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: modproxy -version vX.Y.Z -out DIR [-root DIR] MODULE_DIR...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *version == "" || *out == "" || flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*root, *version, *out, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

// mod is one published module: its directory relative to the root and its
// parsed go.mod.
type mod struct {
	dir  string
	file *modfile.File
}

func run(root, version, out string, dirs []string) error {
	if !semver.IsValid(version) || semver.Canonical(version) != version {
		return fmt.Errorf("version %q is not canonical semver (vX.Y.Z[-pre])", version)
	}
	mods := make([]mod, 0, len(dirs))
	ours := map[string]bool{}
	for _, d := range dirs {
		d = filepath.ToSlash(filepath.Clean(d))
		name := path.Join(d, "go.mod")
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			return err
		}
		f, err := modfile.Parse(name, data, nil)
		if err != nil {
			return err
		}
		if f.Module == nil {
			return fmt.Errorf("%s: no module line", name)
		}
		if len(f.Replace) > 0 {
			return fmt.Errorf("%s has %d replace directive(s) (first: %s => %s): go install pkg@version refuses a module whose go.mod replaces; go.work joins the modules in a clone",
				name, len(f.Replace), f.Replace[0].Old.Path, f.Replace[0].New.Path)
		}
		mods = append(mods, mod{dir: d, file: f})
		ours[f.Module.Mod.Path] = true
	}
	files, err := gitFiles(root)
	if err != nil {
		return err
	}
	// Every directory holding a go.mod is a module's root: a module's zip
	// stops at them.
	var modRoots []string
	for _, f := range files {
		if path.Base(f) == "go.mod" {
			modRoots = append(modRoots, path.Dir(f))
		}
	}
	info, err := json.Marshal(struct{ Version, Time string }{version, time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		return err
	}
	for _, m := range mods {
		gomod, err := rewrite(m.file, ours, version)
		if err != nil {
			return err
		}
		mpath := m.file.Module.Mod.Path
		esc, err := module.EscapePath(mpath)
		if err != nil {
			return err
		}
		dir := filepath.Join(out, filepath.FromSlash(esc), "@v")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		zfiles := moduleFiles(root, m.dir, files, modRoots, gomod)
		zf, err := os.Create(filepath.Join(dir, version+".zip"))
		if err != nil {
			return err
		}
		zerr := zip.Create(zf, module.Version{Path: mpath, Version: version}, zfiles)
		if cerr := zf.Close(); zerr == nil {
			zerr = cerr
		}
		if zerr != nil {
			return fmt.Errorf("%s: zip: %w", mpath, zerr)
		}
		if err := os.WriteFile(filepath.Join(dir, version+".mod"), gomod, 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, version+".info"), info, 0o644); err != nil {
			return err
		}
		if err := appendList(filepath.Join(dir, "list"), version); err != nil {
			return err
		}
		fmt.Printf("%s@%s: %d files\n", mpath, version, len(zfiles))
	}
	return nil
}

// rewrite returns f's text with every requirement on one of ours at version.
func rewrite(f *modfile.File, ours map[string]bool, version string) ([]byte, error) {
	for _, r := range f.Require {
		if ours[r.Mod.Path] {
			if err := f.AddRequire(r.Mod.Path, version); err != nil {
				return nil, err
			}
		}
	}
	f.Cleanup()
	return f.Format()
}

// gitFiles lists the files git would commit under root: tracked ones that
// still exist, and untracked ones not ignored, as slash-separated paths.
func gitFiles(root string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files in %s: %w: %s", root, err, strings.TrimSpace(stderr.String()))
	}
	var files []string
	for _, f := range strings.Split(string(outb), "\x00") {
		if f == "" {
			continue
		}
		if _, err := os.Lstat(filepath.Join(root, filepath.FromSlash(f))); errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the working tree
		}
		files = append(files, f)
	}
	slices.Sort(files)
	return slices.Compact(files), nil
}

// moduleFiles returns the files of the module rooted at dir: those under
// it and not under a nested module's root, with go.mod's text replaced by
// gomod.
func moduleFiles(root, dir string, files, modRoots []string, gomod []byte) []zip.File {
	under := func(f, d string) bool { return d == "." || f == d || strings.HasPrefix(f, d+"/") }
	var zfiles []zip.File
	for _, f := range files {
		if !under(f, dir) {
			continue
		}
		nested := slices.ContainsFunc(modRoots, func(r string) bool {
			return r != dir && under(r, dir) && under(f, r)
		})
		if nested {
			continue
		}
		rel := f
		if dir != "." {
			rel = strings.TrimPrefix(f, dir+"/")
		}
		zf := diskFile{rel: rel, name: filepath.Join(root, filepath.FromSlash(f))}
		if rel == "go.mod" {
			zfiles = append(zfiles, memFile{diskFile: zf, data: gomod})
			continue
		}
		zfiles = append(zfiles, zf)
	}
	return zfiles
}

// diskFile is a module file read from the working tree.
type diskFile struct{ rel, name string }

func (f diskFile) Path() string                 { return f.rel }
func (f diskFile) Lstat() (os.FileInfo, error)  { return os.Lstat(f.name) }
func (f diskFile) Open() (io.ReadCloser, error) { return os.Open(f.name) }

// memFile is a module file whose content is given (the rewritten go.mod).
type memFile struct {
	diskFile
	data []byte
}

func (f memFile) Lstat() (os.FileInfo, error) {
	fi, err := os.Lstat(f.name)
	if err != nil {
		return nil, err
	}
	return sizedInfo{fi, int64(len(f.data))}, nil
}

func (f memFile) Open() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(f.data)), nil }

// sizedInfo is a FileInfo with another size.
type sizedInfo struct {
	fs.FileInfo
	size int64
}

func (i sizedInfo) Size() int64 { return i.size }

// appendList adds version to a proxy list file unless it is there.
func appendList(name, version string) error {
	data, err := os.ReadFile(name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if slices.Contains(strings.Fields(string(data)), version) {
		return nil
	}
	f, err := os.OpenFile(name, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, werr := fmt.Fprintln(f, version)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	return werr
}
