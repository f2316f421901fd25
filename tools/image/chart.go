package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// chartDir is the chart, relative to the repository root, whose default
// image this program's default name is.
var chartDir = filepath.Join("deploy", "helm", "eventsd")

// DefaultName is the image the chart in root installs by default: its
// values' image.repository and, as the tag, its appVersion.
func DefaultName(root string) (string, error) {
	repo, tag, err := chartImage(root)
	if err != nil {
		return "", err
	}
	return repo + ":" + tag, nil
}

// chartImage is the chart's image.repository and appVersion.
func chartImage(root string) (repo, tag string, err error) {
	dir := filepath.Join(root, chartDir)
	chart, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return "", "", fmt.Errorf("the chart's image: %w", err)
	}
	values, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
	if err != nil {
		return "", "", fmt.Errorf("the chart's image: %w", err)
	}
	tag = scalar(chart, "", "appVersion")
	repo = scalar(values, "image", "repository")
	if tag == "" || repo == "" {
		return "", "", fmt.Errorf("the chart's image: no appVersion in %s/Chart.yaml or no image.repository in its values.yaml: give --name", filepath.ToSlash(chartDir))
	}
	return repo, tag, nil
}

// scalar is the plain scalar value of key in a YAML document's top-level
// mapping (parent "") or in the block mapping of the top-level key
// parent, unquoted; "" when absent. The chart's files keep these on
// one line each, as `helm template` (test/release) checks.
func scalar(doc []byte, parent, key string) string {
	in, indent := parent == "", 0
	if parent != "" {
		indent = 2
	}
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		n := len(line) - len(strings.TrimLeft(line, " "))
		if parent != "" && n == 0 {
			in = strings.HasPrefix(line, parent+":")
			continue
		}
		if !in || n != indent {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || k != key {
			continue
		}
		if i := strings.Index(v, " #"); i >= 0 {
			v = v[:i]
		}
		return strings.Trim(strings.TrimSpace(v), `"'`)
	}
	return ""
}
