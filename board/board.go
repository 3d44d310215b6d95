// Package board is `cde-run board`: a local, read-only web page for the
// runs and benches under some directories, live while they train. It lists
// the runs (directories with metrics.jsonl) and benches (directories with
// runs/ARM/seed-N) it finds; a run's page draws any of its metrics against
// the step, several runs overlaid; a bench's page shows the arm x seed
// grid with each arm-seed's state, curves with a band over seeds per arm,
// the results table, the verdict table (provisional until the bench is
// done) and the pass@k curves. The page polls the JSON API below every 2 s.
//
//	GET /                         the page (assets embedded in the binary)
//	GET /api/list                 runs and benches found, with their state
//	GET /api/run?id=ID            one run: state, step, metric names
//	GET /api/series?id=ID&m=NAME  metrics of a run (m repeatable), min/max-decimated
//	GET /api/bench?id=ID          a bench: grid, results, verdicts, pass@k
//	GET /api/bench/series?id=ID&m=NAME  per arm: mean, min and max over seeds
//
// An ID is "ROOT/PATH": the index of a directory given to New and a local
// path under it ("." for the directory itself). Every file is read through
// an os.Root of its directory, so no ID, dot-dot or symbolic link reaches
// outside the directories named; the server answers GET and HEAD only and
// writes nothing. docs/board.md describes the page.
package board

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cde-rl/cde/bench"
)

// DefaultAddr is where `cde-run board` listens unless told otherwise.
const DefaultAddr = "127.0.0.1:6006"

//go:embed assets
var assets embed.FS

// Options configure a Server.
type Options struct {
	// Dirs are the directories served (at least one).
	Dirs []string
	// Specs are bench files given by hand (--spec): a bench directory
	// whose commands.txt names a bench file of the same stem, or whose
	// own name is the stem, takes its arms, seeds and claims from it.
	Specs []*bench.Spec
	// StaleAfter: an unfinished run whose lock is not seen held counts as
	// running while its metrics.jsonl was written this recently (default
	// 2 minutes; a lock on another machine's file system is not seen).
	StaleAfter time.Duration
	// MaxPoints is the most points a series is sent with (default 2000).
	MaxPoints int
	// AnyHost answers requests whatever their Host header. Without it
	// only localhost and loopback addresses are answered, so a page
	// elsewhere that rebinds its own name to 127.0.0.1 reads nothing; the
	// command sets it when it listens beyond loopback.
	AnyHost bool
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
}

// root is one directory served.
type root struct {
	name string // as given, cleaned
	path string // absolute
	r    *os.Root
}

// Server is the board's http.Handler.
type Server struct {
	o     Options
	roots []*root
	mux   *http.ServeMux

	mu        sync.Mutex
	runs      map[string]*runCache   // by ID
	benches   map[string]*benchCache // by ID
	seen      map[string][]sample    // by ID: steps seen, for the ETA
	tails     map[string]tailInfo    // by ID
	configs   map[string]configInfo  // by root and path
	locks     lockTable
	heldSeen  map[string]bool // lock files seen held, by ID
	locksAt   time.Time
	locksRead bool

	listMu sync.Mutex // one listing at a time
	list   *listing
	listAt time.Time
}

// New opens the directories of o.Dirs.
func New(o Options) (*Server, error) {
	if len(o.Dirs) == 0 {
		return nil, errors.New("board: no directory to serve")
	}
	if o.StaleAfter <= 0 {
		o.StaleAfter = 2 * time.Minute
	}
	if o.MaxPoints <= 0 {
		o.MaxPoints = 2000
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Server{o: o, runs: map[string]*runCache{}, benches: map[string]*benchCache{}, seen: map[string][]sample{},
		tails: map[string]tailInfo{}, configs: map[string]configInfo{}, heldSeen: map[string]bool{}}
	for _, d := range o.Dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, err
		}
		st, err := os.Stat(abs)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("board: %w", err)
		}
		if !st.IsDir() {
			s.Close()
			return nil, fmt.Errorf("board: %s is not a directory", d)
		}
		r, err := os.OpenRoot(abs)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("board: %w", err)
		}
		s.roots = append(s.roots, &root{name: filepath.Clean(d), path: abs, r: r})
	}
	static, _ := fs.Sub(assets, "assets")
	mux := http.NewServeMux()
	mux.Handle("/", noStore(http.FileServerFS(static)))
	mux.HandleFunc("/api/list", s.handleList)
	mux.HandleFunc("/api/run", s.handleRun)
	mux.HandleFunc("/api/series", s.handleSeries)
	mux.HandleFunc("/api/bench", s.handleBench)
	mux.HandleFunc("/api/bench/series", s.handleBenchSeries)
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) { httpError(w, http.StatusNotFound, "no such endpoint") })
	s.mux = mux
	return s, nil
}

// Close releases the directories.
func (s *Server) Close() error {
	for _, r := range s.roots {
		r.r.Close()
	}
	return nil
}

// ServeHTTP answers GET and HEAD requests whose Host is this machine's
// loopback name (any Host with Options.AnyHost).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
	h.Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		httpError(w, http.StatusMethodNotAllowed, "read-only: GET and HEAD only")
		return
	}
	if !s.o.AnyHost && !loopbackHost(r.Host) {
		httpError(w, http.StatusForbidden, "Host "+r.Host+" is not this machine's loopback name")
		return
	}
	s.mux.ServeHTTP(w, r)
}

// loopbackHost reports whether host (HOST or HOST:PORT) is localhost or a
// loopback address.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func noStore(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(true)
	if err := enc.Encode(v); err != nil {
		// The client went away, or a value had no JSON form (a bug).
		return
	}
}

// errNotFound answers 404; errBadID 400.
var (
	errNotFound = errors.New("not found")
	errBadID    = errors.New("bad id")
)

func idError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, errBadID):
		httpError(w, http.StatusBadRequest, err.Error())
	default:
		httpError(w, http.StatusNotFound, err.Error())
	}
}

// resolve splits an ID into its root and a clean local path. It refuses
// a path that is absolute, climbs with "..", or is not in its clean form;
// symbolic links are left to os.Root, which refuses any that leaves the
// directory.
func (s *Server) resolve(id string) (*root, string, error) {
	i, rel, ok := strings.Cut(id, "/")
	if !ok {
		return nil, "", fmt.Errorf("%w: %q: want ROOT/PATH", errBadID, id)
	}
	n, err := strconv.Atoi(i)
	if err != nil || n < 0 || n >= len(s.roots) || strconv.Itoa(n) != i {
		return nil, "", fmt.Errorf("%w: %q: no such directory", errBadID, id)
	}
	if rel != "." && (!filepath.IsLocal(rel) || filepath.Clean(rel) != rel || strings.ContainsRune(rel, '\\') || strings.ContainsRune(rel, 0)) {
		return nil, "", fmt.Errorf("%w: %q: the path must be a clean path inside the directory", errBadID, id)
	}
	return s.roots[n], rel, nil
}

// makeID is the ID of rel under root n.
func makeID(n int, rel string) string { return strconv.Itoa(n) + "/" + filepath.ToSlash(rel) }

// rootIndex is the index of r in s.roots.
func (s *Server) rootIndex(r *root) int {
	for i, x := range s.roots {
		if x == r {
			return i
		}
	}
	return -1
}

// join is rel/name inside a root ("." stays out of the way).
func join(rel string, names ...string) string {
	return filepath.Join(append([]string{rel}, names...)...)
}
