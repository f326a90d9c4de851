package service

// roleConns is what each role may hold of a process's PostgreSQL connections
// when PAYSVC_DB_MAX_CONNS leaves them to the roles. The engine commits one
// batch per owned partition at a time and reads instances while the previous
// batch commits; the API reads snapshots and keys for many requests at once and
// writes idempotency records through a pool of its own; the others poll or
// claim a little work at a time. base is the process's own (migrations, jobs,
// health, the ledger audit).
var roleConns = map[string]int{RoleAPI: 24, RoleEngine: 24, RoleRelay: 6, RoleRails: 8, RoleDispatcher: 8}

const (
	baseConns = 4
	// idemConns is the API's idempotency pool when the roles size the pools; given
	// a total, it takes a quarter of it.
	idemConns = 8
)

// DBConns is how many PostgreSQL connections the process may open, all pools
// together: PAYSVC_DB_MAX_CONNS, or the sum of its roles' shares (82 for all
// five roles, 32 for an api-only process). A deployment sizes PostgreSQL's
// max_connections as the sum over its processes plus the operators' own
// (docker-compose.yml does).
func (c Config) DBConns() int {
	if c.DBMaxConns > 0 {
		return c.DBMaxConns
	}
	n := baseConns
	for _, r := range c.Roles {
		n += roleConns[r]
	}
	if c.Has(RoleAPI) {
		n += idemConns
	}
	return n
}

// DBPools splits DBConns between the main pool and, in a process with the api
// role, the idempotency pool (writes with synchronous_commit off).
func (c Config) DBPools() (main, idempotency int) {
	total := c.DBConns()
	if !c.Has(RoleAPI) {
		return total, 0
	}
	idem := idemConns
	if c.DBMaxConns > 0 {
		idem = max(2, total/4)
	}
	return total - idem, idem
}

// minDBConns is the fewest connections a process of these roles runs with: two
// for the main pool, two more for the API's idempotency pool.
func minDBConns(c Config) int {
	if c.Has(RoleAPI) {
		return 4
	}
	return 2
}
