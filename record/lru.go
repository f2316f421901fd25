package record

// lruCache is a fixed-size least-recently-used map. It is not safe for
// concurrent use: each sink worker owns its caches. k8s.io/utils/lru would
// box every key in an interface and take a mutex per call; the worker needs
// neither. Values live in the cache's nodes, and a full cache reuses the
// node it evicts, so a steady stream of new keys allocates nothing here.
type lruCache[K comparable, V any] struct {
	size    int
	items   map[K]*lruNode[K, V]
	head    lruNode[K, V] // sentinel: head.next is the most recent, head.prev the least
	onEvict func(K, *V)
}

type lruNode[K comparable, V any] struct {
	key        K
	val        V
	prev, next *lruNode[K, V]
}

// newLRU returns a cache of size entries; onEvict, if set, sees each entry
// evicted to make room, before its node is reused.
func newLRU[K comparable, V any](size int, onEvict func(K, *V)) *lruCache[K, V] {
	c := &lruCache[K, V]{size: max(size, 1), items: make(map[K]*lruNode[K, V]), onEvict: onEvict}
	c.head.next, c.head.prev = &c.head, &c.head
	return c
}

func (c *lruCache[K, V]) unlink(n *lruNode[K, V]) {
	n.prev.next, n.next.prev = n.next, n.prev
}

func (c *lruCache[K, V]) pushFront(n *lruNode[K, V]) {
	n.prev, n.next = &c.head, c.head.next
	c.head.next.prev = n
	c.head.next = n
}

// get returns the value for k, valid until the next insert, and marks it
// most recently used.
func (c *lruCache[K, V]) get(k K) (*V, bool) {
	n, ok := c.items[k]
	if !ok {
		return nil, false
	}
	c.unlink(n)
	c.pushFront(n)
	return &n.val, true
}

// insert adds k, which must not be present, as the most recently used
// entry and returns its value slot, evicting the least recently used entry
// when full. The slot holds the zero value, or, when an evicted node is
// reused, that node's old value, which the caller may recycle (a slice's
// backing array).
func (c *lruCache[K, V]) insert(k K) *V {
	var n *lruNode[K, V]
	if len(c.items) >= c.size {
		n = c.head.prev
		c.unlink(n)
		delete(c.items, n.key)
		if c.onEvict != nil {
			c.onEvict(n.key, &n.val)
		}
	} else {
		n = &lruNode[K, V]{}
	}
	n.key = k
	c.items[k] = n
	c.pushFront(n)
	return &n.val
}

// len is the number of entries.
func (c *lruCache[K, V]) len() int { return len(c.items) }
