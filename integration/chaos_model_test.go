package integration

import (
	"fmt"
	"math"

	"github.com/anishathalye/porcupine"

	"github.com/etcdlock/etcdlock/fencing"
)

// History operations checked with porcupine. Every operation belongs to
// one lock name, and histories are partitioned by name.

type opKind int

const (
	opAcquire     opKind = iota // a client became the holder with Token
	opFree                      // the observer saw the key with Token deleted
	opFencedWrite               // an etcdfence write with Token; Output is accepted
	opRegister                  // a write to the in-process register with Token; Output is accepted
)

type lockInput struct {
	Name  string
	Kind  opKind
	Token fencing.Token
}

// lockState is the model's state for one name: the holder's token (0 when
// free) and the register's high-water mark.
type lockState struct {
	Holder fencing.Token
	High   fencing.Token
}

// lockModel: the holder changes only from free to a new token (acquire)
// and back to free when that token's key is deleted; a fenced etcd write
// is accepted exactly when its token is the holder's; the register accepts
// a write exactly when its token is not older than the newest accepted.
var lockModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byName := map[string][]porcupine.Operation{}
		var names []string
		for _, op := range history {
			n := op.Input.(lockInput).Name
			if _, ok := byName[n]; !ok {
				names = append(names, n)
			}
			byName[n] = append(byName[n], op)
		}
		out := make([][]porcupine.Operation, 0, len(names))
		for _, n := range names {
			out = append(out, byName[n])
		}
		return out
	},
	Init: func() interface{} { return lockState{} },
	Step: func(s, in, out interface{}) (bool, interface{}) {
		st, op := s.(lockState), in.(lockInput)
		switch op.Kind {
		case opAcquire:
			// Never while held, not even by the same token: a session that
			// re-acquires a name whose release failed replaces its leftover
			// key (a delete, then a new token), it never adopts it.
			if st.Holder != 0 {
				return false, st
			}
			st.Holder = op.Token
			return true, st
		case opFree:
			if st.Holder == op.Token {
				st.Holder = 0
			}
			return true, st
		case opFencedWrite:
			return out.(bool) == (st.Holder == op.Token), st
		case opRegister:
			ok := op.Token >= st.High
			if out.(bool) != ok {
				return false, st
			}
			if ok {
				st.High = op.Token
			}
			return true, st
		}
		return false, st
	},
	Equal: func(a, b interface{}) bool { return a.(lockState) == b.(lockState) },
	DescribeOperation: func(in, out interface{}) string {
		op := in.(lockInput)
		switch op.Kind {
		case opAcquire:
			return fmt.Sprintf("acquire(%s) -> %s", op.Name, op.Token)
		case opFree:
			return fmt.Sprintf("deleted(%s, %s)", op.Name, op.Token)
		case opFencedWrite:
			return fmt.Sprintf("etcd write(%s, %s) -> %v", op.Name, op.Token, out)
		case opRegister:
			return fmt.Sprintf("register write(%s, %s) -> %v", op.Name, op.Token, out)
		}
		return "?"
	},
	DescribeState: func(s interface{}) string {
		st := s.(lockState)
		return fmt.Sprintf("holder %s, register %s", st.Holder, st.High)
	},
}

// never is the return time of an operation whose reply never came.
const never = math.MaxInt64
