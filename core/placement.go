package core

// AfterFinalizer is an optional capability of an AdvantageHook: when
// AfterFinalize is true, the trainer calls the hook after the algorithm's
// Finalize (PPO's batch whitening) instead of before it, so the hook reads
// the finalized advantages and its bonus is added to them unwhitened. A
// hook without it, or answering false, is called before Finalize, and its
// bonus is whitened with the advantages. Plugin strategies are always
// called before.
type AfterFinalizer interface {
	AfterFinalize() bool
}
