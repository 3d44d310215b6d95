package bench

// Verdicts judges spec's claims on the arm-seeds finished (DONE) in dir
// as the report would now (the same rule, registration and Holm
// families; the entries of verdicts.json) and writes nothing: cde-run
// board shows them while a bench trains. They are provisional while
// arm-seeds are missing, which the second result lists ("ARM seed N").
func Verdicts(spec *Spec, dir string) ([]ClaimVerdict, []string, error) {
	runs, missing, err := loadRuns(spec, dir)
	if err != nil {
		return nil, nil, err
	}
	reg, err := registered(dir)
	if err != nil {
		return nil, nil, err
	}
	return judgeClaims(spec, dir, runs, reg, nil), missing, nil
}
