// Package trainer is the machinery over package core's contract: the
// Trainer loop (collect a batch, shape it with the algorithm and
// strategies, update the actor and critic, evaluate), config loading and
// its defaults (koanf), checkpoints with their manifests, run directories
// and their locks, progress, presets, and the evaluation files. An
// application runs training through it (package session assembles one
// from a config); a strategy, algorithm or plugin needs only core.
package trainer
