package main

import (
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

func runSetVersion(args []string, stdout io.Writer) error {
	fset := flag.NewFlagSet("release set-version", flag.ContinueOnError)
	src := fset.String("source", "", "The repository root (default: the git checkout holding the working directory).")
	if err := fset.Parse(args); err != nil {
		return err
	}
	if fset.NArg() != 1 {
		return fmt.Errorf("set-version takes one version (v0.1.0), got %q", fset.Args())
	}
	root := *src
	if root == "" {
		var err error
		if root, err = repoRoot(); err != nil {
			return err
		}
	}
	changed, err := SetVersion(root, fset.Arg(0))
	if err != nil {
		return err
	}
	if len(changed) == 0 {
		fmt.Fprintf(stdout, "%s is already the version of the chart and the kustomize bases' image\n", fset.Arg(0))
		return nil
	}
	fmt.Fprintf(stdout, "set %s in:\n  %s\n", fset.Arg(0), strings.Join(changed, "\n  "))
	return nil
}

var (
	chartVersionRE = regexp.MustCompile(`(?m)^version:.*$`)
	appVersionRE   = regexp.MustCompile(`(?m)^appVersion:.*$`)
	// kustomizeImageRE is an eventsd container's image in a base.
	kustomizeImageRE = regexp.MustCompile(`(?m)^(\s*image:\s*)(\S+/eventsd):[^\s@]+$`)
)

// kustomizeDir holds the kustomize bases, relative to the root.
var kustomizeDir = filepath.Join("deploy", "kustomize")

// SetVersion writes version into the files a release's checkout must
// name: the chart's version (without the v) and appVersion, and the tag
// of eventsd's image in the kustomize bases. It returns the files it
// changed, relative to root.
func SetVersion(root, version string) ([]string, error) {
	if err := checkVersion(version); err != nil {
		return nil, err
	}
	var changed []string
	update := func(rel string, edit func(string) (string, error)) error {
		p := filepath.Join(root, rel)
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("set-version: %w", err)
		}
		s, err := edit(string(b))
		if err != nil {
			return fmt.Errorf("set-version: %s: %w", filepath.ToSlash(rel), err)
		}
		if s == string(b) {
			return nil
		}
		changed = append(changed, filepath.ToSlash(rel))
		return os.WriteFile(p, []byte(s), 0o644)
	}
	err := update(filepath.Join(chartDir, "Chart.yaml"), func(s string) (string, error) {
		for _, f := range []struct {
			re   *regexp.Regexp
			line string
		}{
			{chartVersionRE, "version: " + strings.TrimPrefix(version, "v")},
			{appVersionRE, `appVersion: "` + version + `"`},
		} {
			if n := len(f.re.FindAllString(s, -1)); n != 1 {
				return "", fmt.Errorf("want one line matching %s, found %d", f.re, n)
			}
			s = f.re.ReplaceAllLiteralString(s, f.line)
		}
		return s, nil
	})
	if err != nil {
		return nil, err
	}
	images := 0
	err = filepath.WalkDir(filepath.Join(root, kustomizeDir), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		return update(rel, func(s string) (string, error) {
			images += len(kustomizeImageRE.FindAllString(s, -1))
			return kustomizeImageRE.ReplaceAllString(s, "${1}${2}:"+version), nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("set-version: %w", err)
	}
	if images == 0 {
		return nil, fmt.Errorf("set-version: no eventsd image (image: <registry>/.../eventsd:<tag>) in %s", filepath.ToSlash(kustomizeDir))
	}
	return changed, nil
}
