package topics

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// LeaveTimeout bounds how long a stopping consumer waits to leave its group.
const LeaveTimeout = 5 * time.Second

// CloseGroupClient leaves cl's consumer group within LeaveTimeout, then closes
// it. kgo's Close waits for the leave without a deadline: against a broker that
// is down, or with rebalances still blocked after a poll (BlockRebalanceOnPoll),
// a SIGTERMed process waited there instead of exiting (docs/cluster.md). A
// member that could not leave in time is expired by the group after its
// session timeout, as a killed one is. It returns the leave's error, if any.
func CloseGroupClient(cl *kgo.Client) error {
	cl.AllowRebalance()
	ctx, cancel := context.WithTimeout(context.Background(), LeaveTimeout)
	defer cancel()
	err := cl.LeaveGroupContext(ctx)
	cl.Close()
	return err
}
