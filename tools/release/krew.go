package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// krewFile is the krew plugin manifest of evctl, written when the
// archives hold evctl: `kubectl krew install --manifest=evctl.krew.yaml`
// installs evctl as `kubectl evctl` from the release's archives, and it is
// what a submission to krew-index takes.
const krewFile = "evctl.krew.yaml"

// writeKrewManifest writes the krew manifest of evctl into dir, pointing
// at the archives of plats under downloadURL/version, with their
// checksums (the archives are in dir).
func writeKrewManifest(dir, downloadURL, version string, plats []platform) error {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: evctl
spec:
  version: %s
  homepage: https://github.com/kubevents/kubevents
  shortDescription: Query events kept longer than the cluster keeps them
  description: |
    evctl reads Kubernetes Events, from the cluster or from kubevents'
    eventsd: get with filters kubectl lacks, a timeline of an object (why
    did my pod restart), watch that resumes without duplicates or gaps.
  platforms:
`, version)
	for _, p := range plats {
		name := archiveName(version, p)
		sum, err := fileSum(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, `    - selector:
        matchLabels:
          os: %s
          arch: %s
      uri: %s/%s/%s
      sha256: %x
      files:
        - from: evctl
          to: .
        - from: LICENSE
          to: .
      bin: evctl
`, p.os, p.arch, strings.TrimSuffix(downloadURL, "/"), version, name, sum)
	}
	return os.WriteFile(filepath.Join(dir, krewFile), []byte(b.String()), 0o644)
}
