package core

// Mix derives a 64-bit seed from a run seed and labels (SplitMix64 over the
// labels), so every step, purpose and eval draws independent, reproducible
// randomness without any RNG state to checkpoint.
func Mix(seed uint64, labels ...uint64) uint64 {
	z := seed
	for _, l := range labels {
		z ^= l + 0x9e3779b97f4a7c15 + (z << 6) + (z >> 2)
		z += 0x9e3779b97f4a7c15
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
	}
	return z
}
