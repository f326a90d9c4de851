package engine

import (
	"context"
	"sync"
	"time"

	"paysvc/storage"
	"paysvc/topics"
)

// The guards that fail closed (docs/design.md, "Fail closed"): sandbox and live processes may share one
// database and one command log, so what the API checks at the edge is a first
// line only. Before any handler runs, the engine checks every command against
// its merchant, whatever produced it:
//
//   - the merchant exists, and the producer's environment (topics.Command.Environment)
//     is the merchant's: a sandbox process cannot act on a live merchant, nor the
//     reverse; a command that names no environment is refused (fail closed);
//   - a simulator's outcome (topics.Command.Simulated) is never applied to a live
//     merchant;
//   - a command that invents money or an outcome (a deposit, a sandbox card's
//     approval) is sandbox only;
//   - a disabled merchant's commands are refused, except those that complete
//     money already in motion (a rail's outcome), which must still land where the
//     money went.
//
// A guard's refusal is answered but not recorded as processed: its id is
// derived, for some commands, from what any process can know (a collection and a
// stage), and a forged command must not take the id of the genuine one that
// follows it. Applying nothing, it is the same refusal however often it comes.
//
// docs/security.md, "Guards of the money-moving commands", has the table.

// Guard is what the engine checks of one command type before its handler runs.
// The zero Guard is the strictest: the merchant's environment and enabled.
type Guard struct {
	// SandboxOnly: the command invents money or an outcome (a deposit, a test
	// card's approval, a cycle charged to a test card); refused for a live
	// merchant, with SandboxDetail if set.
	SandboxOnly   bool
	SandboxDetail string
	// WhileDisabled: the command completes money already in motion (a rail's
	// outcome, a clearing), so it applies to a disabled merchant as well.
	WhileDisabled bool
	// Subject, when set, names the merchant the checks are about instead of the
	// command's own (a P2P credit, in the recipient's partition, is checked
	// against its payer; its handler checks the recipient).
	Subject func(payload any) string
}

// Reasons of guard refusals (paysvc_engine_guard_refusals_total).
const (
	guardUnknownMerchant = "unknown_merchant"
	guardNoEnvironment   = "no_environment"
	guardEnvironment     = "environment"
	guardSimulated       = "simulated"
	guardSandboxOnly     = "sandbox_only"
	guardDisabled        = "disabled"
)

// CodeMerchantDisabled refuses a disabled merchant's command.
const CodeMerchantDisabled = "merchant_disabled"

var guardRefusals = counterVec("paysvc_engine_guard_refusals_total",
	"Commands the engine refused before their handler (docs/security.md, Guards): by command type and reason "+
		"(environment, no_environment, simulated, sandbox_only, disabled, unknown_merchant). Any environment, "+
		"no_environment or simulated refusal means a process acted on another environment's merchant.",
	"type", "reason")

// guardOf is the guard of a command type: its kind's, or the strictest for
// anything else.
func (e *Engine) guardOf(typ string) Guard {
	if k := e.kinds.byCmd[typ]; k != nil {
		return k.Guards[typ]
	}
	return Guard{}
}

// guard checks a command before its handler. refused says the command must not
// run; reply is then its answer. view is what the batch read of its merchants
// (merchantCache.prefetch), before any command applied.
func (e *Engine) guard(ctx context.Context, c *topics.Command, payload any, view map[string]merchantState) (reply topics.Reply, refused bool) {
	subject := e.subject(c, payload)
	g := e.guardOf(c.Type)
	m := view[subject]
	reason := ""
	switch {
	case !m.exists:
		reason, reply = guardUnknownMerchant, refuse(CodeNotFound, "Merchant not found.", "")
	case c.Environment == "":
		reason, reply = guardNoEnvironment, refuse(CodeNotFound, "Not found: the command names no environment.", "")
	case c.Environment != m.environment:
		// As the other environment's resources are to the API: absent.
		reason, reply = guardEnvironment, refuse(CodeNotFound, "Not found.", "")
	case c.Simulated && m.environment != topics.Sandbox:
		reason, reply = guardSimulated, refuse(CodeInvalid, "A simulated outcome never applies to a live merchant.", "")
	case g.SandboxOnly && m.environment != topics.Sandbox:
		detail := "This operation exists only in the sandbox; this merchant is live."
		if g.SandboxDetail != "" {
			detail = g.SandboxDetail
		}
		reason, reply = guardSandboxOnly, refuse(CodeInvalid, detail, "")
	case !m.enabled && !g.WhileDisabled:
		reason, reply = guardDisabled, refuse(CodeMerchantDisabled, "This merchant account is disabled.", "")
	default:
		return topics.Reply{}, false
	}
	guardRefusals.WithLabelValues(c.Type, reason).Inc()
	if reason != guardDisabled {
		e.log.WarnContext(ctx, "command refused by the engine's guard", "command_id", c.ID, "type", c.Type, "merchant_id", subject,
			"reason", reason, "producer_environment", c.Environment, "simulated", c.Simulated)
	}
	return reply, true
}

// subject is the merchant a command's guard is about: its own, or the one its
// guard names.
func (e *Engine) subject(c *topics.Command, payload any) string {
	if g := e.guardOf(c.Type); g.Subject != nil {
		if s := g.Subject(payload); s != "" {
			return s
		}
	}
	return c.MerchantID
}

// merchantState is what the guards read of a merchant.
type merchantState struct {
	exists      bool
	environment string
	enabled     bool
	at          time.Time // when it was read
}

// merchantCache keeps merchants' environment (fixed at creation) and enabled
// flag, read again once older than the engine's MerchantRefresh: a merchant
// disabled by an operator is refused by every partition within that time, and a
// hot merchant costs one read per interval, not one per command.
type merchantCache struct {
	mu sync.Mutex
	m  map[string]merchantState
}

// prefetch reads, in one query, the merchants of a batch's commands (each
// command's own and its guard's subject) that the cache does not hold fresh, and
// returns the batch's view of all of them: the guards and the handlers read that
// view, never the database, while the batch applies. A merchant not found is in
// the view as not existing, and not kept in the cache (it may be made later).
func (mc *merchantCache) prefetch(ctx context.Context, e *Engine, cmds []*topics.Command, payloads []any,
	skip func(*topics.Command) bool) (map[string]merchantState, error) {
	view := map[string]merchantState{}
	var want []string
	now := time.Now()
	mc.mu.Lock()
	for i, c := range cmds {
		if c == nil || skip(c) {
			continue
		}
		for _, id := range []string{c.MerchantID, e.subject(c, payloads[i])} {
			if _, ok := view[id]; ok {
				continue
			}
			s, ok := mc.m[id]
			if ok && now.Sub(s.at) < e.cfg.MerchantRefresh {
				view[id] = s
				continue
			}
			view[id] = merchantState{}
			want = append(want, id)
		}
	}
	mc.mu.Unlock()
	if len(want) == 0 {
		return view, nil
	}
	found, err := storage.GetMerchants(ctx, e.db, want)
	if err != nil {
		return nil, err
	}
	mc.mu.Lock()
	defer mc.mu.Unlock()
	if mc.m == nil || len(mc.m)+len(found) > 100_000 {
		mc.m = map[string]merchantState{}
	}
	for id, m := range found {
		s := merchantState{exists: true, environment: m.Environment, enabled: m.Enabled, at: now}
		mc.m[id], view[id] = s, s
	}
	return view, nil
}
