package edge

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/labstack/echo/v4"
	"github.com/labstack/gommon/log"
)

// EchoLogger is Echo's logger written to slog, so the few lines Echo logs itself
// (a response written twice, a reply that could not be sent, a route added without
// a handler) reach the service's log as structured records at the level Echo
// gave, with component=echo, and not as gommon's own text on stderr. The JSON
// variants log their map as one attribute; Fatal and Panic keep Echo's contract
// (exit, panic) after the record is written.
func EchoLogger(l *slog.Logger) echo.Logger {
	return &echoLog{l: l.With("component", "echo"), lvl: log.INFO}
}

type echoLog struct {
	l      *slog.Logger
	prefix string
	lvl    log.Lvl
}

var _ echo.Logger = (*echoLog)(nil)

var slogLevel = map[log.Lvl]slog.Level{log.DEBUG: slog.LevelDebug, log.INFO: slog.LevelInfo,
	log.WARN: slog.LevelWarn, log.ERROR: slog.LevelError}

func (e *echoLog) emit(lvl log.Lvl, msg string, attrs ...any) {
	if lvl < e.lvl && lvl != log.OFF {
		return
	}
	sl, ok := slogLevel[lvl]
	if !ok {
		sl = slog.LevelError // Fatal and Panic
	}
	e.l.Log(context.Background(), sl, msg, attrs...)
}

func (e *echoLog) json(lvl log.Lvl, j log.JSON) {
	e.emit(lvl, "echo", slog.Any("fields", map[string]any(j)))
}

// Output is where Echo's StdLogger and the Logger middleware write raw lines:
// each becomes one record.
func (e *echoLog) Output() io.Writer         { return lineWriter{e} }
func (e *echoLog) SetOutput(io.Writer)       {}
func (e *echoLog) Prefix() string            { return e.prefix }
func (e *echoLog) SetPrefix(p string)        { e.prefix = p }
func (e *echoLog) Level() log.Lvl            { return e.lvl }
func (e *echoLog) SetLevel(v log.Lvl)        { e.lvl = v }
func (e *echoLog) SetHeader(string)          {}
func (e *echoLog) Print(i ...any)            { e.emit(log.INFO, fmt.Sprint(i...)) }
func (e *echoLog) Printf(f string, a ...any) { e.emit(log.INFO, fmt.Sprintf(f, a...)) }
func (e *echoLog) Printj(j log.JSON)         { e.json(log.INFO, j) }
func (e *echoLog) Debug(i ...any)            { e.emit(log.DEBUG, fmt.Sprint(i...)) }
func (e *echoLog) Debugf(f string, a ...any) { e.emit(log.DEBUG, fmt.Sprintf(f, a...)) }
func (e *echoLog) Debugj(j log.JSON)         { e.json(log.DEBUG, j) }
func (e *echoLog) Info(i ...any)             { e.emit(log.INFO, fmt.Sprint(i...)) }
func (e *echoLog) Infof(f string, a ...any)  { e.emit(log.INFO, fmt.Sprintf(f, a...)) }
func (e *echoLog) Infoj(j log.JSON)          { e.json(log.INFO, j) }
func (e *echoLog) Warn(i ...any)             { e.emit(log.WARN, fmt.Sprint(i...)) }
func (e *echoLog) Warnf(f string, a ...any)  { e.emit(log.WARN, fmt.Sprintf(f, a...)) }
func (e *echoLog) Warnj(j log.JSON)          { e.json(log.WARN, j) }
func (e *echoLog) Error(i ...any)            { e.emit(log.ERROR, fmt.Sprint(i...)) }
func (e *echoLog) Errorf(f string, a ...any) { e.emit(log.ERROR, fmt.Sprintf(f, a...)) }
func (e *echoLog) Errorj(j log.JSON)         { e.json(log.ERROR, j) }
func (e *echoLog) Fatal(i ...any)            { e.emit(log.OFF, fmt.Sprint(i...)); os.Exit(1) }
func (e *echoLog) Fatalf(f string, a ...any) { e.emit(log.OFF, fmt.Sprintf(f, a...)); os.Exit(1) }
func (e *echoLog) Fatalj(j log.JSON)         { e.json(log.OFF, j); os.Exit(1) }
func (e *echoLog) Panic(i ...any)            { s := fmt.Sprint(i...); e.emit(log.OFF, s); panic(s) }
func (e *echoLog) Panicf(f string, a ...any) { s := fmt.Sprintf(f, a...); e.emit(log.OFF, s); panic(s) }
func (e *echoLog) Panicj(j log.JSON)         { e.json(log.OFF, j); panic(j) }

// lineWriter turns each Write into one warning record (what arrives here is a
// net/http or middleware complaint, never a request log).
type lineWriter struct{ e *echoLog }

func (w lineWriter) Write(p []byte) (int, error) {
	msg := string(p)
	for len(msg) > 0 && (msg[len(msg)-1] == '\n' || msg[len(msg)-1] == '\r') {
		msg = msg[:len(msg)-1]
	}
	w.e.emit(log.WARN, msg)
	return len(p), nil
}
