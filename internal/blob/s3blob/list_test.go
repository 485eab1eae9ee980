package s3blob

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/agentkernel/agentkernel/internal/blob"
	"github.com/agentkernel/agentkernel/internal/blob/blobtest"
)

// TestListSkipsForeignObjects: objects under the prefix that no Put makes
// (no .blob suffix, names no key can have) are not listed, and List pages
// through levels larger than one ListObjectsV2 page in key order.
func TestListSkipsForeignObjects(t *testing.T) {
	s := openTest(t, testOptions(t))
	ctx := context.Background()
	for _, name := range []string{"readme.txt", "a/.hidden.blob", "a/notes", ".tmp-x.blob"} {
		if _, err := s.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.bucket, Key: aws.String(s.prefix + name),
			Body: strings.NewReader("x")}); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for i := range 1003 {
		k := fmt.Sprintf("a/%04d", i)
		if _, err := s.Put(ctx, k, strings.NewReader(k)); err != nil {
			t.Fatal(err)
		}
		want = append(want, k)
	}
	var got []string
	for info, err := range s.List(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, info.Key)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("List = %d keys (first %q), want the %d blobs in order", len(got), got[:min(3, len(got))], len(want))
	}
}

// TestTraversalKeysNeverReachTheServer: keys that would climb out of the
// prefix are refused by key validation, and no object with their name is
// written anywhere in the bucket.
func TestTraversalKeysNeverReachTheServer(t *testing.T) {
	s := openTest(t, testOptions(t))
	ctx := context.Background()
	mark := "escape-" + strings.Trim(s.prefix, "/")
	for _, key := range []string{"../" + mark, "a/../../" + mark, "/" + mark, `a\..\` + mark, "a/./" + mark, mark + ".blob/../y"} {
		if _, err := s.Put(ctx, key, strings.NewReader("x")); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("Put(%q) = %v, want ErrInvalidKey", key, err)
		}
	}
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: &s.bucket})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			if strings.Contains(aws.ToString(o.Key), mark) {
				t.Errorf("a refused Put wrote %q", aws.ToString(o.Key))
			}
		}
	}
}

// TestKeysWithSpecialCharacters: characters that URLs and XML escape
// (space, +, %, &, <, ?, #, non-ASCII) survive Put, Get and List.
func TestKeysWithSpecialCharacters(t *testing.T) {
	s := openTest(t, testOptions(t))
	ctx := context.Background()
	keys := []string{"a b/c+d", "a b/e%20f", "a b/g&h<i>", "a b/j?k#l", "a b/né/ü", "a b/x~y=z;w'q\"", "a b/\uFFFD\u4e2d"}
	for _, k := range keys {
		if _, err := s.Put(ctx, k, strings.NewReader(k)); err != nil {
			t.Fatalf("Put(%q): %v", k, err)
		}
	}
	for _, k := range keys {
		if got, _ := blobtest.ReadAll(t, s, k); string(got) != k {
			t.Fatalf("Get(%q) = %q", k, got)
		}
	}
	var got []string
	for info, err := range s.List(ctx, "a b/") {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, info.Key)
	}
	want := slices.Sorted(slices.Values(keys))
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("List = %q, want %q", got, want)
	}
}
