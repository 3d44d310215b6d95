// Package repocheck holds tests of the repository itself rather than of
// any code: that it is self-contained, so that a fresh clone has every file
// its code, docs and configs cite; and that every in-tree strategy and
// algorithm is wired in (imported by strategies/all or algos/all) and
// documented (its row in docs/config.md). It has no exported API.
package repocheck
