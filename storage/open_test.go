package storage_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"paysvc/storage"
)

// With no server there, OpenPool says where it looks while it waits and when it
// gives up, and never the password.
func TestOpenSaysWhereItLooks(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	url := "postgres://paysvc:hunter2-secret@" + addr + "/paysvc?sslmode=disable"
	_, err = storage.OpenPool(context.Background(), url, 600*time.Millisecond, storage.Pool{MaxConns: 2, Log: log})
	if err == nil {
		t.Fatal("OpenPool connected to a closed port")
	}
	where := addr + "/paysvc"
	if msg := err.Error(); !strings.Contains(msg, where) || !strings.Contains(msg, "make pg") || strings.Contains(msg, "hunter2") {
		t.Errorf("error %q: want where (%s) and what to run, without the password", msg, where)
	}
	if out := buf.String(); !strings.Contains(out, "waiting for PostgreSQL") || !strings.Contains(out, where) || strings.Contains(out, "hunter2") {
		t.Errorf("log %q: want a wait naming %s, without the password", out, where)
	}
	if got := storage.Where(url); got != where {
		t.Errorf("Where = %q, want %q", got, where)
	}
}
