package prompts

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
)

// load reads every class's data and prepares the mix for drawing.
func (m *Mix) load(dir string) error {
	needCorpus := false
	for _, c := range m.classes {
		if c.path != "" && dir != "" && !filepath.IsAbs(c.path) {
			c.path = filepath.Join(dir, c.path)
		}
		needCorpus = needCorpus || c.st.needsCorpus
		if err := c.st.load(m, c); err != nil {
			return err
		}
	}
	if needCorpus {
		m.corp = corpusFor(m.tok)
	}
	if !m.trace {
		total := 0.0
		last := 0
		for i, c := range m.classes {
			total += c.weight
			if c.weight > 0 {
				last = i
			}
		}
		m.cum = make([]float64, len(m.classes))
		run := 0.0
		for i, c := range m.classes {
			run += c.weight
			m.cum[i] = run / total
			if i >= last {
				m.cum[i] = 1
			}
		}
	}
	return nil
}

// readFile opens a class's file, parses it with parse, and records the
// SHA-256 of the whole file for the canonical form.
func (c *class) readFile(parse func(r io.Reader) error) error {
	f, err := os.Open(c.path)
	if err != nil {
		return c.pathNode.Errorf("%v", err)
	}
	defer f.Close()
	h := sha256.New()
	if err := parse(f); err != nil {
		return err
	}
	// The identity is the file's bytes: all of them, or where reading
	// stopped early (a trace read to a horizon) the part read, with the
	// file's size and modification time beside it, so that reading the
	// rest of a long trace costs nothing.
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return &Error{File: c.path, Err: err}
	}
	src := io.Reader(f)
	if c.readBytes > 0 {
		fi, err := f.Stat()
		if err != nil {
			return &Error{File: c.path, Err: err}
		}
		c.fileSize, c.modTime = fi.Size(), fi.ModTime().UTC()
		src = io.LimitReader(f, c.readBytes)
	}
	if _, err := io.Copy(h, src); err != nil {
		return &Error{File: c.path, Err: err}
	}
	c.sha256 = hex.EncodeToString(h.Sum(nil))
	return nil
}

func (m *Mix) loadDataset(c *class) error {
	var convs []conv
	err := c.readFile(func(r io.Reader) error {
		var err error
		if c.srcType == SourceJSONL {
			convs, err = parseChatJSONL(c.path, r, c.limit)
			return err
		}
		convs, c.skipped, err = parseShareGPT(c.path, r, c.limit)
		return locateShareGPT(c.path, err, func() (io.ReadCloser, error) { return os.Open(c.path) })
	})
	if err != nil {
		return err
	}
	return m.buildItems(c, convs)
}

// buildItems turns dataset records into the class's items and counts
// their tokens.
func (m *Mix) buildItems(c *class, convs []conv) error {
	var refs [][]string // reference answers per item and turn
	for _, cv := range convs {
		it := item{line: cv.line, maxTokens: cv.maxTokens, params: mergeParams(cv.params, c.params)}
		var ref []string
		switch {
		case c.sess != nil:
			it.system, it.turns, ref = splitTurns(cv.messages)
			if cv.text != "" {
				it.turns, ref = []string{cv.text}, []string{""}
			}
			if c.sess.maxTurns > 0 && len(it.turns) > c.sess.maxTurns {
				it.turns, ref = it.turns[:c.sess.maxTurns], ref[:c.sess.maxTurns]
			}
			if len(it.turns) == 0 {
				c.skipped++
				continue
			}
		case c.srcType == SourceShareGPT:
			// As vLLM's ShareGPT loader: the first user turn is the prompt,
			// the answer after it the reference output.
			_, turns, answers := splitTurns(cv.messages)
			if len(turns) == 0 || answers[0] == "" {
				c.skipped++
				continue
			}
			it.messages = []Message{{Role: "user", Content: turns[0]}}
			ref = answers[:1]
		default:
			it.messages, it.text = cv.messages, cv.text
		}
		c.items = append(c.items, it)
		refs = append(refs, ref)
	}
	if len(c.items) == 0 {
		return &Error{File: c.path, Err: errors.New("no usable records (a conversation needs a user turn and, outside sessions, an answer after it)")}
	}
	// Count once items no longer move.
	var tasks []countTask
	for i := range c.items {
		it := &c.items[i]
		for _, msg := range it.messages {
			tasks = append(tasks, countTask{msg.Content, &it.tokens})
		}
		if it.text != "" {
			tasks = append(tasks, countTask{it.text, &it.tokens})
		}
		for _, msg := range it.system {
			tasks = append(tasks, countTask{msg.Content, &it.systemTokens})
		}
		it.turnTokens = make([]int, len(it.turns))
		for j := range it.turns {
			tasks = append(tasks, countTask{it.turns[j], &it.turnTokens[j]})
		}
		it.refTokens = make([]int, len(refs[i]))
		for j, r := range refs[i] {
			tasks = append(tasks, countTask{r, &it.refTokens[j]})
		}
	}
	countAll(m.tok, tasks)
	return nil
}

// splitTurns cuts a conversation into the system messages before its first
// user turn, the user turns, and the answer after each turn ("" if none).
func splitTurns(msgs []Message) (system []Message, turns, answers []string) {
	i := 0
	for ; i < len(msgs) && msgs[i].Role != "user"; i++ {
		if msgs[i].Role == "system" || msgs[i].Role == "developer" {
			system = append(system, msgs[i])
		}
	}
	for ; i < len(msgs); i++ {
		if msgs[i].Role != "user" || msgs[i].Content == "" {
			continue
		}
		turns = append(turns, msgs[i].Content)
		a := ""
		if i+1 < len(msgs) && msgs[i+1].Role == "assistant" {
			a = msgs[i+1].Content
		}
		answers = append(answers, a)
	}
	return system, turns, answers
}

// mergeParams gives the class's params precedence over a record's own.
func mergeParams(own, cls map[string]any) map[string]any {
	if len(own) == 0 {
		return cls
	}
	out := make(map[string]any, len(own)+len(cls))
	for k, v := range own {
		out[k] = v
	}
	for k, v := range cls {
		out[k] = v
	}
	return out
}

type countTask struct {
	text string
	dst  *int
}

// countAll counts tokens for every task, in parallel; tasks may share a
// destination (a sum), which is added to under a lock.
func countAll(tok Tokenizer, tasks []countTask) {
	if len(tasks) == 0 {
		return
	}
	workers := runtime.GOMAXPROCS(0)
	if workers > len(tasks) {
		workers = len(tasks)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan int, len(tasks))
	for i := range tasks {
		next <- i
	}
	close(next)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				n := tok.Count(tasks[i].text)
				mu.Lock()
				*tasks[i].dst += n
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

func (m *Mix) loadTrace(c *class) error {
	if m.horizon > 0 && c.srcType == SourceMooncake {
		run := float64(m.horizon+TraceLookAhead) / m.timeScale
		c.stopNs = int64(c.from) + int64(min(run, float64(math.MaxInt64/2)))
		if c.until > 0 {
			c.stopNs = min(c.stopNs, int64(c.until))
		}
	}
	var rows []traceRow
	var t0 int64
	err := c.readFile(func(r io.Reader) error {
		var err error
		rows, t0, err = c.st.rows(c, r)
		return err
	})
	if err != nil {
		return err
	}
	return m.buildTrace(c, rows, t0)
}

// checkSynthetic checks that a synthetic class's sessions fit in the
// corpus; it reads nothing.
func (m *Mix) checkSynthetic(c *class) error {
	if c.sess != nil && c.sess.turns.max*c.input.max > tokenLimit {
		return c.srcNode.Errorf("sessions of up to %v turns of up to %v tokens exceed %d tokens of history", c.sess.turns.max, c.input.max, tokenLimit)
	}
	return nil
}

// buildTrace sorts a class's rows by timestamp (stable: equal times keep
// file order), keeps the window and the usable rows, and computes each
// row's scaled offset. t0 is the trace's first timestamp if rows do not
// hold it (rows filtered out by model).
func (m *Mix) buildTrace(c *class, rows []traceRow, t0 int64) error {
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].tsNs < rows[j].tsNs })
	t0 = min(t0, rows[0].tsNs)
	kept := rows[:0]
	for _, r := range rows {
		off := time.Duration(r.tsNs - t0)
		if off < c.from || (c.until > 0 && off >= c.until) {
			continue
		}
		if r.in == 0 || r.out == 0 {
			c.skipped++ // failed requests (BurstGPT logs them with 0 tokens)
			continue
		}
		kept = append(kept, r)
	}
	if len(kept) == 0 {
		return &Error{File: c.path, Err: errors.New("no usable rows in the window (rows need non-zero input and output tokens)")}
	}
	c.rows = kept
	c.at = make([]time.Duration, len(kept))
	base := t0 + int64(c.from)
	for i, r := range kept {
		off := r.tsNs - base
		if m.timeScale == 1 {
			c.at[i] = time.Duration(off)
		} else {
			c.at[i] = time.Duration(math.Round(float64(float64(off) * m.timeScale)))
		}
	}
	return nil
}

// detectFormat tells a bare prompts file's source type by its content.
func detectFormat(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", &Error{File: path, Err: err}
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	b, _, err := peekNonSpace(br)
	if err != nil {
		return "", errAt(path, 0, "", "empty file")
	}
	switch b {
	case '[':
		return SourceShareGPT, nil
	case '{':
		line, _ := br.ReadBytes('\n')
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(bytes.TrimSpace(line), &obj); err != nil {
			// A pretty-printed ShareGPT object spans lines.
			return SourceShareGPT, nil
		}
		switch {
		case obj["conversations"] != nil:
			return SourceShareGPT, nil
		case obj["messages"] != nil || obj["prompt"] != nil:
			return SourceJSONL, nil
		case obj["timestamp"] != nil && obj["input_length"] != nil:
			return SourceMooncake, nil
		}
		return "", errAt(path, 1, "", "cannot tell the format: want chat requests (messages), ShareGPT (conversations) or a Mooncake trace (timestamp, input_length)")
	}
	header, _ := br.ReadString('\n')
	h := strings.ToLower(header)
	switch {
	case strings.Contains(h, "contexttokens"):
		return SourceAzure, nil
	case strings.Contains(h, "request tokens"):
		return SourceBurstGPT, nil
	}
	return "", errAt(path, 1, "", "cannot tell the format: want JSONL chat requests, ShareGPT JSON, or an Azure/BurstGPT CSV trace")
}
