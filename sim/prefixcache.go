package sim

import (
	"sync"
)

// The prefix cache, as vLLM's automatic prefix caching counts it: the
// prompt is cut into blocks of Config.BlockSize tokens, each full block
// named by a hash chained over every block before it (so a block matches
// only where the whole prefix up to it does), and the blocks are kept in
// an LRU of Config.PrefixCacheBlocks. At admission a request hits the
// longest run of leading blocks the cache holds, at most (prompt − 1)
// tokens' worth, since the last prompt token is always computed to get
// the first output's logits; those tokens cost no prefill. Then every
// full block of the prompt is cached (output tokens are not). The
// counters are vLLM's: queries += prompt tokens, hits += hit tokens.

// fnv64 constants (FNV-1a).
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// blockHasher chains a prompt's token ids into full-block hashes.
type blockHasher struct {
	size   int
	limit  int // tokens to take: the prompt's token count
	n      int // tokens taken so far
	inBlk  int // tokens in the current block
	h      uint64
	prev   uint64
	last   uint64 // the last token id, for padding
	blocks []uint64
}

func newBlockHasher(seed uint64, size, limit int) *blockHasher {
	b := &blockHasher{size: size, limit: limit, prev: seed}
	if limit >= size {
		b.blocks = make([]uint64, 0, limit/size)
	}
	b.h = b.start()
	return b
}

func (b *blockHasher) start() uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < 8; i++ {
		h ^= (b.prev >> (8 * i)) & 0xff
		h *= fnvPrime
	}
	return h
}

// token adds one token id; ids past the prompt's count are ignored.
func (b *blockHasher) token(id uint64) {
	if b.n >= b.limit {
		return
	}
	b.n++
	b.last = id
	for i := 0; i < 8; i++ {
		b.h ^= (id >> (8 * i)) & 0xff
		b.h *= fnvPrime
	}
	b.inBlk++
	if b.inBlk == b.size {
		b.blocks = append(b.blocks, b.h)
		b.prev, b.inBlk = b.h, 0
		b.h = b.start()
	}
}

// text adds a text's tokens. Tokens are taken as whitespace-led words,
// each named by its bytes' hash: a synthetic prompt's words are exactly
// its tokens, and texts that share a leading run of words share those
// ids, which is all a prefix cache needs. The count comes from the
// tokenizer, so done pads or cuts the words to it.
func (b *blockHasher) text(s string) {
	i := 0
	for i < len(s) && b.n < b.limit {
		h := uint64(fnvOffset)
		j := i
		for j < len(s) && isSpace(s[j]) { // the leading space is the word's
			h ^= uint64(s[j])
			h *= fnvPrime
			j++
		}
		for j < len(s) && !isSpace(s[j]) {
			h ^= uint64(s[j])
			h *= fnvPrime
			j++
		}
		b.token(h)
		i = j
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }

// done pads the tokens to the prompt's count (ids that follow from the
// last word, so equal texts pad alike) and returns the full blocks'
// hashes.
func (b *blockHasher) done() []uint64 {
	for k := uint64(1); b.n < b.limit; k++ {
		b.token(b.last*fnvPrime ^ k)
	}
	return b.blocks
}

// prefixCache is one engine's cache of block hashes, least recently used
// first out.
type prefixCache struct {
	mu       sync.Mutex
	capacity int
	size     int // tokens per block
	nodes    map[uint64]*lruNode
	head     lruNode // sentinel: head.next is the most recent, head.prev the least
}

type lruNode struct {
	key        uint64
	prev, next *lruNode
}

func newPrefixCache(capacity, blockSize int) *prefixCache {
	c := &prefixCache{capacity: capacity, size: blockSize, nodes: make(map[uint64]*lruNode, min(capacity, 1<<16))}
	c.head.prev, c.head.next = &c.head, &c.head
	return c
}

func (c *prefixCache) unlink(n *lruNode) {
	n.prev.next, n.next.prev = n.next, n.prev
}

func (c *prefixCache) pushFront(n *lruNode) {
	n.prev, n.next = &c.head, c.head.next
	c.head.next.prev = n
	c.head.next = n
}

// hits is the prompt tokens a prompt of prompt tokens with these
// full-block hashes would hit now, without touching the cache.
func (c *prefixCache) hits(blocks []uint64, prompt int) int {
	if c == nil || len(blocks) == 0 {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hitBlocks(blocks, prompt) * c.size
}

func (c *prefixCache) hitBlocks(blocks []uint64, prompt int) int {
	hit, maxHit := 0, (prompt-1)/c.size
	for hit < len(blocks) && hit < maxHit {
		if _, ok := c.nodes[blocks[hit]]; !ok {
			break
		}
		hit++
	}
	return hit
}

// admit looks a prompt of prompt tokens with these full-block hashes up
// and caches its blocks; it returns the tokens hit.
func (c *prefixCache) admit(blocks []uint64, prompt int) int {
	if c == nil || len(blocks) == 0 {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	hit := c.hitBlocks(blocks, prompt)
	// Cached in reverse, so a prompt's first blocks are the most recent
	// and the last to go, as vLLM frees a request's blocks tail first.
	for i := len(blocks) - 1; i >= 0; i-- {
		key := blocks[i]
		if n, ok := c.nodes[key]; ok {
			c.unlink(n)
			c.pushFront(n)
			continue
		}
		var n *lruNode
		if len(c.nodes) >= c.capacity {
			n = c.head.prev // evict the least recently used, reusing its node
			c.unlink(n)
			delete(c.nodes, n.key)
		} else {
			n = &lruNode{}
		}
		n.key = key
		c.nodes[key] = n
		c.pushFront(n)
	}
	return hit * c.size
}

// len is how many blocks are cached.
func (c *prefixCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.nodes)
}

// clear forgets every block, as a restarted engine's cache is empty.
func (c *prefixCache) clear() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.nodes)
	c.head.prev, c.head.next = &c.head, &c.head
}
