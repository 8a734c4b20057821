package main

import (
	_ "github.com/edsrzf/mmap-go"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/schollz/progressbar/v3"
	_ "github.com/spf13/cobra"
	_ "github.com/zeebo/blake3"
	_ "golang.org/x/sys/cpu"
	_ "gonum.org/v1/gonum/mat"
	_ "gonum.org/v1/plot"
)

func main() {}
