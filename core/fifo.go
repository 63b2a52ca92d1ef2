package core

// fifo is a growable circular queue owned by one goroutine. It allocates
// only when it grows past its largest size so far.
type fifo[T any] struct {
	buf   []T
	head  int
	count int
}

func (q *fifo[T]) len() int { return q.count }

func (q *fifo[T]) push(v T) {
	if q.count == len(q.buf) {
		grown := make([]T, max(8, 2*len(q.buf)))
		for i := 0; i < q.count; i++ {
			grown[i] = *q.at(i)
		}
		q.buf, q.head = grown, 0
	}
	*q.at(q.count) = v
	q.count++
}

// at returns the i-th element from the head (0 = oldest); i < len().
func (q *fifo[T]) at(i int) *T {
	j := q.head + i
	if j >= len(q.buf) {
		j -= len(q.buf)
	}
	return &q.buf[j]
}

// pop removes and returns the oldest element; the queue must not be empty.
func (q *fifo[T]) pop() T {
	var zero T
	v := q.buf[q.head]
	q.buf[q.head] = zero
	q.head++
	if q.head == len(q.buf) {
		q.head = 0
	}
	q.count--
	return v
}
