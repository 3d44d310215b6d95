// Package repocheck holds tests of the repository itself rather than of
// any code: that it is self-contained, so that a fresh clone has every file
// its code, docs and configs cite. It has no exported API.
package repocheck
