package service

import (
	"io"
	"log/slog"
	"os"
)

// NewLogger is the log of both binaries (paysvc and paysvc-bench): JSON, unless
// PAYSVC_LOG_FORMAT is auto and w is a terminal (then text for people), at
// PAYSVC_LOG_LEVEL.
func NewLogger(cfg Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	format := cfg.LogFormat
	if format == "auto" {
		format = "json"
		if f, ok := w.(*os.File); ok {
			if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
				format = "text"
			}
		}
	}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
