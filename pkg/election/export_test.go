package election

// WithoutTenure returns c for an elector that writes no tenure key and
// proves nothing: its successors do not wait after an unclean end. The
// negative control of the overlap check.
func WithoutTenure(c Config) Config {
	c.noTenure = true
	return c
}

// WithProofFault returns c for an elector that calls fault before each
// proof of a term's keys: a proof fails with fault's error.
func WithProofFault(c Config, fault func() error) Config {
	c.proofFault = fault
	return c
}

// CleanupTimeout bounds the elector's clean-ups.
const CleanupTimeout = cleanupTimeout
