// Package subscription is the recurring card billing aggregate: a customer's
// subscription to a plan, billed on the plan's schedule (docs/state-machines.md,
// "Subscription"). State, Apply and Step are pure; each subscription is an
// engine actor hosting Step (subscriptionkind, docs/adr/0007), and
// the scheduler issues each due cycle as a command whose id is derived from the
// subscription and the cycle (CycleCommandID), so a cycle is charged once however
// many schedulers issue it. The cycle carries the plan's terms; the kind prices it
// when it applies it (PriceCycle), as a card collection is priced.
//
// Dates are calendar dates in Africa/Nairobi (Zone); a cycle is due at 00:00 EAT
// of its date. Monthly and yearly schedules count from an anchor day and clamp to
// the end of shorter months without drifting (ScheduleDate).
package subscription
