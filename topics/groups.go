package topics

import (
	"context"
	"errors"
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
	// Close leaves again, and waits for the leave with no deadline: when the
	// group's join is stuck on a broker that died mid-rebalance, that wait never
	// ends (a SIGTERMed rails process hung there in the cluster test). Close is
	// given the same bound; past it the client is abandoned: the process is
	// stopping, and the group expires the member.
	closed := make(chan struct{})
	go func() {
		cl.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(LeaveTimeout):
		if err == nil {
			err = errCloseTimeout
		}
	}
	return err
}

var errCloseTimeout = errors.New("kafka client did not close within " + LeaveTimeout.String())
