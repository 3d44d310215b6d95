// Command servestress puts one `cde-run serve` under the three loads the
// hardening probe (issue 25) used to stall or balloon it, all at once, and
// measures what an ordinary client then sees:
//
//   - --slow connections (500) that send their headers and part of a body,
//     then nothing;
//   - abandoned requests: --abandoned (32) clients at once, each asking
//     for one prompt x --n (512) completions of --max-tokens (60) tokens
//     and giving up after --abandon-after (3 s), as `curl -m 3` does (run
//     to their end one after another, they would hold the model for
//     --abandoned times one request's time);
//   - a 60 MB body of one 30M-id prompt, streamed.
//
// It times a one-token request right after the abandoned clients left,
// then, once the huge body is answered, --probes (5) more, and reads the server's peak
// resident memory (VmHWM, Linux). It serves the shipped base policy (cde's
// character transformer, context 64, so 60 new tokens is the most a 4-token
// prompt allows) unless --checkpoint names another.
//
//	go run ./benchmarks/servestress
//	go run ./benchmarks/servestress --bin ./cde-run --slow 1000
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	bin := flag.String("bin", "", "cde-run binary (default: go build ./cmd/cde-run into a temporary directory)")
	ckpt := flag.String("checkpoint", "", "what to serve (default: the shipped base policy in assets/base)")
	slow := flag.Int("slow", 500, "connections that send headers and part of a body, then stall")
	n := flag.Int("n", 512, "completions in the abandoned request")
	maxTokens := flag.Int("max-tokens", 60, "tokens per completion in the abandoned request")
	abandon := flag.Duration("abandon-after", 3*time.Second, "when the abandoned requests' clients give up")
	abandoned := flag.Int("abandoned", 32, "abandoned requests, sent at once")
	bodyMB := flag.Int("body-mb", 60, "size of the huge-prompt body in MB (2 bytes per id)")
	probes := flag.Int("probes", 5, "one-token requests timed once the loads are in place")
	flag.Parse()

	if *bin == "" {
		dir, err := os.MkdirTemp("", "servestress")
		check(err)
		defer os.RemoveAll(dir)
		*bin = filepath.Join(dir, "cde-run")
		fmt.Fprintln(os.Stderr, "building cde-run...")
		out, err := exec.Command("go", "build", "-o", *bin, "./cmd/cde-run").CombinedOutput()
		if err != nil {
			fail("go build: %v\n%s", err, out)
		}
	}
	if *ckpt == "" {
		m, _ := filepath.Glob(filepath.Join("assets", "base", "*", "policy.gob"))
		if len(m) == 0 {
			fail("no shipped base policy under assets/base: run from the repository root or give --checkpoint")
		}
		*ckpt = filepath.Dir(m[0])
	}
	cmd := exec.Command(*bin, "serve", "--checkpoint", *ckpt, "--engine", "cpu", "--addr", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	check(err)
	var logs bytes.Buffer
	cmd.Stderr = &logs
	check(cmd.Start())
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if err != nil || !ok {
		fail("no listening line (%v): %q\n%s", err, line, logs.String())
	}
	pid := cmd.Process.Pid
	fmt.Printf("serve (pid %d) on %s, %s; peak RSS at start %.1f MB\n", pid, url, *ckpt, mb(vmHWM(pid)))
	before := probe(url)
	fmt.Printf("one-token request on the idle server: %.3f s\n", before.Seconds())

	// 1. Slow connections: headers and 10 of 1000 body bytes, then silence.
	host := strings.TrimPrefix(url, "http://")
	var conns []net.Conn
	for range *slow {
		c, err := net.Dial("tcp", host)
		if err != nil {
			fail("slow connection %d: %v", len(conns), err)
		}
		fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"prompt\":", host)
		conns = append(conns, c)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	fmt.Printf("%d slow connections open\n", len(conns))

	// 2. The abandoned requests; first one alone, timed to the end, for
	// what each would cost the model.
	body := fmt.Sprintf(`{"prompt": [[1, 5, 6, 7]], "n": %d, "max_tokens": %d, "temperature": 1}`, *n, *maxTokens)
	t0 := time.Now()
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
	check(err)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	one := time.Since(t0)
	fmt.Printf("one %d x %d request run to its end: %.3f s (%d)\n", *n, *maxTokens, one.Seconds(), resp.StatusCode)
	var wg sync.WaitGroup
	var mu sync.Mutex
	finished := 0
	abandonedAt := time.Now()
	for range *abandoned {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), *abandon)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/completions", strings.NewReader(body))
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				finished++
				mu.Unlock()
			}
		}()
	}

	// 3. The huge body, streamed.
	var hwg sync.WaitGroup
	hwg.Add(1)
	go func() {
		defer hwg.Done()
		pr, pw := io.Pipe()
		go func() {
			pw.Write([]byte(`{"prompt": [[1`))
			chunk := bytes.Repeat([]byte(",1"), 1<<19)
			for range *bodyMB {
				if _, err := pw.Write(chunk); err != nil {
					return
				}
			}
			pw.Write([]byte(`]]}`))
			pw.Close()
		}()
		t0 := time.Now()
		resp, err := http.Post(url+"/v1/completions", "application/json", pr)
		pr.Close()
		if err != nil {
			fmt.Printf("huge body: %v\n", err)
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("huge body (%d MB): %d after %.3f s: %.90s\n", *bodyMB, resp.StatusCode, time.Since(t0).Seconds(), strings.TrimSpace(string(b)))
	}()
	wg.Wait()
	fmt.Printf("%d of %d requests answered before their clients gave up; all gone %.1f s after sending\n",
		finished, *abandoned, time.Since(abandonedAt).Seconds())
	// Right after the abandoned clients left: a server that still runs
	// their requests makes this one wait for them.
	after := probe(url)
	fmt.Printf("one-token request right after: %.3f s\n", after.Seconds())
	hwg.Wait()

	var times []time.Duration
	for range *probes {
		times = append(times, probe(url))
	}
	slices.Sort(times)
	peak := vmHWM(pid)
	fmt.Printf("\n| measure | value |\n|---|---|\n")
	fmt.Printf("| slow connections held | %d |\n", len(conns))
	fmt.Printf("| abandoned requests | %d at once, each 1 prompt x n %d x %d tokens (%.3f s run alone), abandoned after %v; %d answered first |\n",
		*abandoned, *n, *maxTokens, one.Seconds(), *abandon, finished)
	fmt.Printf("| huge body | %d MB, one prompt of %d ids |\n", *bodyMB, *bodyMB<<19+1)
	fmt.Printf("| one-token request, idle server | %.3f s |\n", before.Seconds())
	fmt.Printf("| one-token request right after the abandoned clients left | %.3f s |\n", after.Seconds())
	fmt.Printf("| one-token request under load, %d tries | median %.3f s, max %.3f s |\n", len(times), times[len(times)/2].Seconds(), times[len(times)-1].Seconds())
	fmt.Printf("| serve peak RSS (VmHWM) | %.1f MB |\n", mb(peak))
}

// probe times one one-token completion; any answer but 200 is fatal.
func probe(url string) time.Duration {
	t0 := time.Now()
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"prompt": [[1, 5]], "max_tokens": 1}`))
	if err != nil {
		fail("one-token request: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		fail("one-token request: %d %s", resp.StatusCode, b)
	}
	return time.Since(t0)
}

// vmHWM is a process's peak resident memory in bytes (Linux /proc; 0
// elsewhere).
func vmHWM(pid int) int64 {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func mb(b int64) float64 { return float64(b) / 1e6 }

func check(err error) {
	if err != nil {
		fail("%v", err)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "servestress: "+format+"\n", args...)
	os.Exit(1)
}
