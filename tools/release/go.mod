module github.com/kubevents/kubevents/tools/release

go 1.26.8
