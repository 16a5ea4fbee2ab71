package hashrange_test

import (
	"fmt"

	"github.com/watchjournal/watchjournal/internal/hashrange"
)

// Split the hash space (4 buckets here, 256 by default) among three
// members; hash a UID (the apiserver v1.37.2 put this one in the first
// half); write the first half as a shardSelector.
func ExampleAssign() {
	split := hashrange.Assign([]string{"a", "b", "c"}, 4)
	for _, m := range []string{"a", "b", "c"} {
		fmt.Printf("%s: %.0f%%\n", m, 100*split[m].Share())
	}
	uid := "07c665ed-9f17-4777-85a1-2b276f4bf0b8"
	fmt.Printf("hash %016x\n", hashrange.Hash(uid))
	fmt.Println(hashrange.Set{{First: 0, Last: 1<<63 - 1}}.Selector())
	// Output:
	// a: 50%
	// b: 25%
	// c: 25%
	// hash 4fdfe5e447bd0865
	// shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')
}
