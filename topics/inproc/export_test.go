package inproc

import "github.com/prometheus/client_golang/prometheus"

// Dials is the connection counter of path ("inproc" or "tcp").
func Dials(path string) prometheus.Counter { return dials.WithLabelValues(path) }
