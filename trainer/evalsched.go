package trainer

// responseEvalDue reports whether eval.every_responses = every asks for
// an evaluation before the step at which generated responses have been
// generated in all, the step before it having generated last of them:
// whether that step took the count to or past a multiple of every. So a
// run evaluates at the first step boundary at or past each multiple,
// once however many multiples one step crossed, and never before the
// first step (eval.at_start decides that). every 0 is off.
func responseEvalDue(every int, generated, last int64) bool {
	if every <= 0 || last <= 0 {
		return false
	}
	n := int64(every)
	return generated/n > (generated-last)/n
}
