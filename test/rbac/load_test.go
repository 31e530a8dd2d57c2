package rbac

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// program is the manager binary's own packages, parsed and type-checked
// from source, in dependency order; its dependencies are read from the
// export data that `go list -export` leaves in the build cache, so only
// the standard library's go/types is needed.
type program struct {
	root string // the repository, absolute
	fset *token.FileSet
	pkgs []*pkg
	// versions maps each module the binary is built from to its version.
	versions map[string]string
}

type pkg struct {
	path  string
	files []*ast.File
	types *types.Package
	info  *types.Info
}

// listed is what load reads of `go list -json`.
type listed struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	CgoFiles   []string
	Export     string
	Module     *struct {
		Path    string
		Version string
		Main    bool
	}
	Error *struct{ Err string }
}

// load type-checks the packages of the main module that pattern needs,
// pattern included, with the go command run in root.
func load(root, pattern string) (*program, error) {
	args := []string{"list", "-export", "-deps", "-json=ImportPath,Dir,GoFiles,CgoFiles,Export,Module,Error"}
	if raceBuild {
		// Under go test -race (make test), the export data of the race
		// build that the other packages' tests make beside this one: on a
		// cold cache, a build of its own compiled every dependency again.
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, pattern)...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -export -deps %s: %w\n%s", pattern, err, stderr.String())
	}
	var own []listed
	exports := map[string]string{}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	prog := &program{root: abs, fset: token.NewFileSet(), versions: map[string]string{}}
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("reading go list's output: %w", err)
		}
		if p.Error != nil {
			return nil, fmt.Errorf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		if p.Module != nil {
			prog.versions[p.Module.Path] = p.Module.Version
		}
		if p.Module != nil && p.Module.Main {
			own = append(own, p)
			continue
		}
		exports[p.ImportPath] = p.Export
	}
	gc := importer.ForCompiler(prog.fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok || file == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
	checked := map[string]*types.Package{}
	imp := importerFunc(func(path string) (*types.Package, error) {
		if p, ok := checked[path]; ok {
			return p, nil
		}
		return gc.Import(path)
	})
	for _, l := range own {
		if len(l.CgoFiles) > 0 {
			return nil, fmt.Errorf("%s has cgo files, which this check cannot type", l.ImportPath)
		}
		p := &pkg{path: l.ImportPath, info: &types.Info{
			Types:      map[ast.Expr]types.TypeAndValue{},
			Defs:       map[*ast.Ident]types.Object{},
			Uses:       map[*ast.Ident]types.Object{},
			Selections: map[*ast.SelectorExpr]*types.Selection{},
			Instances:  map[*ast.Ident]types.Instance{},
		}}
		for _, name := range l.GoFiles {
			f, err := parser.ParseFile(prog.fset, filepath.Join(l.Dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				return nil, err
			}
			p.files = append(p.files, f)
		}
		conf := types.Config{Importer: imp}
		tp, err := conf.Check(l.ImportPath, prog.fset, p.files, p.info)
		if err != nil {
			return nil, fmt.Errorf("type-checking %s: %w", l.ImportPath, err)
		}
		p.types = tp
		checked[l.ImportPath] = tp
		prog.pkgs = append(prog.pkgs, p)
	}
	return prog, nil
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }
