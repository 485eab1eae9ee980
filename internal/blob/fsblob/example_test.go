package fsblob_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"strings"

	"github.com/agentkernel/agentkernel/internal/blob/fsblob"
)

func Example() {
	dir, _ := os.MkdirTemp("", "blobs")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	s, err := fsblob.Open(ctx, dir, fsblob.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	info, err := s.Put(ctx, "backups/t1/s1/0001.tar.zst", strings.NewReader("snapshot bytes"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.Size, info.SHA256[:12])

	rc, _, err := s.Get(ctx, info.Key)
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc) // fails with blob.ErrCorrupt if the file was damaged
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(b))
	// Output:
	// 14 ee36ef8194c4
	// snapshot bytes
}
