// Package replies brings a command's result back to the API request waiting for it.
//
// The API registers a waiter under the command id before producing the command.
// The engine, after its batch commits, hands each reply to the waiting instance:
// directly when that instance lives in the same process (the Hub registry), and
// otherwise through paysvc.replies.v1, which every API instance reads from its end.
// A reply that is lost on the way is not lost for good: it is stored with the
// processed command, and the API looks it up there when its wait times out.
package replies

import (
	"sync"

	"paysvc/topics"
)

// Hub is one API instance's set of waiting requests.
type Hub struct {
	instance string
	mu       sync.Mutex
	waiters  map[string]chan topics.Reply
}

var local sync.Map // instance id -> *Hub

// NewHub creates the hub of an instance and makes it reachable in-process.
func NewHub(instance string) *Hub {
	h := &Hub{instance: instance, waiters: map[string]chan topics.Reply{}}
	local.Store(instance, h)
	return h
}

// Close removes the hub from the in-process registry.
func (h *Hub) Close() { local.CompareAndDelete(h.instance, h) }

// Local returns the hub of an instance in this process, or nil.
func Local(instance string) *Hub {
	if v, ok := local.Load(instance); ok {
		return v.(*Hub)
	}
	return nil
}

// Instance is the id commands carry in reply_to.
func (h *Hub) Instance() string { return h.instance }

// Register starts waiting for a command's reply. The returned cancel must be called
// when the caller stops waiting.
func (h *Hub) Register(commandID string) (<-chan topics.Reply, func()) {
	ch := make(chan topics.Reply, 1)
	h.mu.Lock()
	h.waiters[commandID] = ch
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		if h.waiters[commandID] == ch {
			delete(h.waiters, commandID)
		}
		h.mu.Unlock()
	}
}

// Deliver hands a reply to its waiter, if one is still waiting. It never blocks.
func (h *Hub) Deliver(r topics.Reply) bool {
	h.mu.Lock()
	ch, ok := h.waiters[r.CommandID]
	if ok {
		delete(h.waiters, r.CommandID)
	}
	h.mu.Unlock()
	if !ok {
		return false
	}
	select {
	case ch <- r:
		return true
	default:
		return false
	}
}

// Waiting is the number of requests waiting for replies.
func (h *Hub) Waiting() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.waiters)
}
