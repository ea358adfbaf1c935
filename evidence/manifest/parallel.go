package manifest

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// minParallelDocs is the document count from which Parse reads documents on several cores: below
// it the goroutines cost more than they save.
const minParallelDocs = 64

// parseParallel reads the documents of a large manifest concurrently, each with both readers as
// parseDocument does; they are independent of one another. It returns ok only when every document
// was read without a finding and at least one object resulted; otherwise Parse reads the
// manifest again in order, so that a refusal (which names the document by its position among
// the objects before it) is exactly the one the sequential reading gives.
func parseParallel(chunks []chunk) ([]Object, bool) {
	workers := min(runtime.GOMAXPROCS(0), len(chunks)/minParallelDocs*2)
	if workers < 2 {
		return nil, false
	}
	type result struct {
		o  Object
		ok bool
	}
	res := make([]result, len(chunks))
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1)) - 1
				if i >= len(chunks) {
					return
				}
				o, ok, err := parseDocument(chunks[i], i)
				if err != nil {
					failed.Store(true)
					return
				}
				res[i] = result{o, ok}
			}
		})
	}
	wg.Wait()
	if failed.Load() {
		return nil, false
	}
	objs := make([]Object, 0, len(chunks))
	for _, r := range res {
		if r.ok {
			r.o.Index = len(objs)
			objs = append(objs, r.o)
		}
	}
	return objs, len(objs) > 0
}
