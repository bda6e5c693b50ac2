// Command relay carries Ethernet frames between two interfaces of the
// network fault harness's hub namespace, delaying, dropping and
// duplicating them: the harness's netem, for a kernel without sch_netem.
// It reads every frame that arrives on one interface (an AF_PACKET
// socket) and sends it out of the other after DELAY ± JITTER (uniform),
// so that frames whose delays cross arrive reordered; it drops a frame
// with probability LOSS and sends one twice with probability DUP. The
// interfaces' offloads must be off (the harness turns them off), so that
// frames are at most the MTU and carry their checksums. It runs until
// SIGTERM.
//
//	relay IFACE_A IFACE_B DELAY JITTER LOSS DUP SEED
package main

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		os.Exit(1)
	}
}

// shape is what the relay does to the frames.
type shape struct {
	delay, jitter time.Duration
	loss, dup     float64
}

func run() error {
	if len(os.Args) != 8 {
		return fmt.Errorf("usage: relay IFACE_A IFACE_B DELAY JITTER LOSS DUP SEED")
	}
	var sh shape
	var err error
	if sh.delay, err = time.ParseDuration(os.Args[3]); err != nil {
		return err
	}
	if sh.jitter, err = time.ParseDuration(os.Args[4]); err != nil {
		return err
	}
	if sh.loss, err = strconv.ParseFloat(os.Args[5], 64); err != nil {
		return err
	}
	if sh.dup, err = strconv.ParseFloat(os.Args[6], 64); err != nil {
		return err
	}
	seed, err := strconv.ParseUint(os.Args[7], 10, 64)
	if err != nil {
		return err
	}
	a, err := open(os.Args[1])
	if err != nil {
		return err
	}
	b, err := open(os.Args[2])
	if err != nil {
		return err
	}
	errc := make(chan error, 2)
	go func() { errc <- forward(a, b, sh, rand.New(rand.NewPCG(seed, 1))) }()
	go func() { errc <- forward(b, a, sh, rand.New(rand.NewPCG(seed, 2))) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	fmt.Println("ready")
	select {
	case <-sig:
		return nil // the process's end closes the sockets and ends the goroutines
	case err := <-errc:
		return err
	}
}

// htons is the network byte order of a protocol number.
func htons(v uint16) uint16 { return v<<8 | v>>8 }

// open returns a packet socket bound to the interface called name.
func open(name string) (int, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return -1, err
	}
	fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW, int(htons(syscall.ETH_P_ALL)))
	if err != nil {
		return -1, fmt.Errorf("packet socket: %w", err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrLinklayer{Protocol: htons(syscall.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
		return -1, fmt.Errorf("bind %s: %w", name, err)
	}
	return fd, nil
}

// frame is a frame due to leave at a time.
type frame struct {
	at   time.Time
	data []byte
}

type queue []frame

func (q queue) Len() int           { return len(q) }
func (q queue) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q queue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)        { *q = append(*q, x.(frame)) }
func (q *queue) Pop() any {
	old := *q
	f := old[len(old)-1]
	*q = old[:len(old)-1]
	return f
}

// forward reads the frames arriving on from and sends them out of to,
// shaped: a reader feeds a queue ordered by departure time.
func forward(from, to int, sh shape, rng *rand.Rand) error {
	in := make(chan frame, 4096)
	errc := make(chan error, 1)
	go func() {
		buf := make([]byte, 65536)
		for {
			n, sa, err := syscall.Recvfrom(from, buf, 0)
			if err != nil {
				if err == syscall.EINTR {
					continue
				}
				errc <- fmt.Errorf("read: %w", err)
				return
			}
			if ll, ok := sa.(*syscall.SockaddrLinklayer); ok && ll.Pkttype == syscall.PACKET_OUTGOING {
				continue // a frame this relay sent out of this interface
			}
			in <- frame{at: time.Now(), data: append([]byte(nil), buf[:n]...)}
		}
	}()
	var q queue
	timer := time.NewTimer(time.Hour)
	for {
		select {
		case f := <-in:
			if rng.Float64() < sh.loss {
				continue
			}
			copies := 1
			if rng.Float64() < sh.dup {
				copies = 2
			}
			for range copies {
				d := sh.delay
				if sh.jitter > 0 {
					d += time.Duration(rng.Int64N(int64(2*sh.jitter))) - sh.jitter
				}
				heap.Push(&q, frame{at: f.at.Add(max(d, 0)), data: f.data})
			}
		case <-timer.C:
		case err := <-errc:
			return err
		}
		now := time.Now()
		for len(q) > 0 && !q[0].at.After(now) {
			f := heap.Pop(&q).(frame)
			if _, err := syscall.Write(to, f.data); err != nil && err != syscall.ENOBUFS {
				return fmt.Errorf("write: %w", err)
			}
		}
		if len(q) > 0 {
			timer.Reset(time.Until(q[0].at))
		} else {
			timer.Reset(time.Hour)
		}
	}
}
