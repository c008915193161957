// llog-lincheck: is a recorded history of partition operations linearizable?
//
// It reads one JSON document on stdin (written by tests/concurrency.py) and checks
// each partition's operations against a sequential specification of a partition's
// log with Porcupine (github.com/anishathalye/porcupine):
//
//   - append(batch, count): acknowledged at start offset s, valid iff s is the next
//     offset (s + count - 1 becomes the high watermark); a duplicate answer of an
//     idempotent batch (the same batch id) is valid iff the batch is already in the
//     log at s. An append whose outcome is unknown may take effect at any point
//     after its call or never (nondeterminism); a definite failure takes none.
//     An append refused as fenced is valid only while the partition is fenced.
//     A conditional append (expect) takes effect only at that start offset, and is
//     refused (mismatch) only when that is not the next offset.
//   - fence / unfence: the partition refuses / accepts appends from then on (a fence
//     whose process died may have taken effect or not).
//   - read(from): returned records [from, from+n) must be the log's records there,
//     in order; its high watermark, when given, must be the log's.
//
// Output: one JSON line {"linearizable": bool, "partitions": n, "operations": n};
// exit status 0 when linearizable, 1 when not, 2 on bad input or a timeout.
// With -html FILE, a non-linearizable history is also drawn to FILE.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

type input struct {
	Kind   string `json:"kind"` // append | fence | unfence | read
	Batch  string `json:"batch,omitempty"`
	Count  int    `json:"count,omitempty"`
	Expect int    `json:"expect,omitempty"` // a conditional append: only at this start offset
	From   int    `json:"from,omitempty"`
}

type output struct {
	Outcome   string   `json:"outcome"` // ok | unknown | failed | fenced | mismatch
	Start     int      `json:"start,omitempty"`
	Duplicate bool     `json:"duplicate,omitempty"`
	Records   []string `json:"records,omitempty"` // read: the batch id of each record returned
	High      *int     `json:"high,omitempty"`    // read: the high watermark it reported, if it is exact
}

type operation struct {
	Partition string `json:"partition"`
	Client    int    `json:"client"`
	Call      int64  `json:"call"`
	Return    int64  `json:"return"` // 0: never returned (its process died)
	Input     input  `json:"input"`
	Output    output `json:"output"`
}

// state is one partition's log: the batch id of every offset from 1 on, and whether it is fenced.
type state struct {
	offsets []string
	fenced  bool
}

func (s state) key() string {
	return fmt.Sprintf("%t|%s", s.fenced, strings.Join(s.offsets, ","))
}

func (s state) holds(batch string) int {
	for i, b := range s.offsets {
		if b == batch {
			return i + 1
		}
	}
	return 0
}

func (s state) appended(batch string, count int) state {
	next := make([]string, len(s.offsets), len(s.offsets)+count)
	copy(next, s.offsets)
	for i := 0; i < count; i++ {
		next = append(next, batch)
	}
	return state{next, s.fenced}
}

func step(st interface{}, in interface{}, out interface{}) []interface{} {
	s := st.(state)
	i := in.(input)
	o := out.(output)
	switch i.Kind {
	case "fence":
		if o.Outcome == "unknown" { // its process died: fenced or not
			return []interface{}{s, state{s.offsets, true}}
		}
		return []interface{}{state{s.offsets, true}}
	case "unfence":
		return []interface{}{state{s.offsets, false}}
	case "read":
		if o.Outcome != "ok" {
			return []interface{}{s}
		}
		if (o.High != nil && *o.High != len(s.offsets)) || i.From-1+len(o.Records) > len(s.offsets) {
			return nil
		}
		for k, batch := range o.Records {
			if s.offsets[i.From-1+k] != batch {
				return nil
			}
		}
		return []interface{}{s}
	case "append":
		at := s.holds(i.Batch)
		switch o.Outcome {
		case "ok":
			if o.Duplicate {
				if at != 0 && at == o.Start {
					return []interface{}{s}
				}
				return nil
			}
			if at != 0 || s.fenced || o.Start != len(s.offsets)+1 || (i.Expect != 0 && o.Start != i.Expect) {
				return nil
			}
			return []interface{}{s.appended(i.Batch, i.Count)}
		case "mismatch":
			if i.Expect != 0 && i.Expect != len(s.offsets)+1 {
				return []interface{}{s}
			}
			return nil
		case "unknown":
			if at != 0 || s.fenced || (i.Expect != 0 && i.Expect != len(s.offsets)+1) {
				return []interface{}{s}
			}
			return []interface{}{s, s.appended(i.Batch, i.Count)}
		case "fenced":
			if s.fenced {
				return []interface{}{s}
			}
			return nil
		case "failed":
			return []interface{}{s}
		}
	}
	return nil
}

var model = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byPartition := map[string][]porcupine.Operation{}
		for _, op := range history {
			p := op.Metadata.(string)
			byPartition[p] = append(byPartition[p], op)
		}
		names := make([]string, 0, len(byPartition))
		for p := range byPartition {
			names = append(names, p)
		}
		sort.Strings(names)
		parts := make([][]porcupine.Operation, 0, len(names))
		for _, p := range names {
			parts = append(parts, byPartition[p])
		}
		return parts
	},
	Init:  func() []interface{} { return []interface{}{state{}} },
	Step:  step,
	Equal: func(a, b interface{}) bool { return a.(state).key() == b.(state).key() },
	Hash: func(s interface{}) uint64 {
		h := fnv.New64a()
		h.Write([]byte(s.(state).key()))
		return h.Sum64()
	},
	DescribeOperation: func(in interface{}, out interface{}) string {
		i, o := in.(input), out.(output)
		switch i.Kind {
		case "append":
			return fmt.Sprintf("append(%s x%d) -> %s %d dup=%t", i.Batch, i.Count, o.Outcome, o.Start, o.Duplicate)
		case "read":
			high := "?"
			if o.High != nil {
				high = fmt.Sprint(*o.High)
			}
			return fmt.Sprintf("read(%d) -> %s %v hw=%s", i.From, o.Outcome, o.Records, high)
		}
		return i.Kind
	},
	DescribeState: func(s interface{}) string { return s.(state).key() },
}

func main() {
	html := flag.String("html", "", "draw a non-linearizable history to this file")
	timeout := flag.Duration("timeout", 5*time.Minute, "give up (exit 2) after this long")
	flag.Parse()
	var doc struct {
		Operations []operation `json:"operations"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&doc); err != nil {
		fmt.Fprintf(os.Stderr, "llog-lincheck: the history is not readable: %v\n", err)
		os.Exit(2)
	}
	history := make([]porcupine.Operation, 0, len(doc.Operations))
	partitions := map[string]bool{}
	var last int64
	for _, op := range doc.Operations {
		if op.Return > last {
			last = op.Return
		}
	}
	for _, op := range doc.Operations {
		ret := op.Return
		if ret == 0 { // never answered: it may take effect at any time after its call
			ret = last + 1
		}
		partitions[op.Partition] = true
		history = append(history, porcupine.Operation{
			ClientId: op.Client, Input: op.Input, Call: op.Call, Output: op.Output, Return: ret, Metadata: op.Partition,
		})
	}
	result, info := porcupine.CheckOperationsVerbose(model.ToModel(), history, *timeout)
	summary, _ := json.Marshal(map[string]interface{}{
		"linearizable": result == porcupine.Ok, "result": string(result),
		"partitions": len(partitions), "operations": len(history),
	})
	fmt.Println(string(summary))
	if result == porcupine.Ok {
		return
	}
	if *html != "" {
		if err := porcupine.VisualizePath(model.ToModel(), info, *html); err != nil {
			fmt.Fprintf(os.Stderr, "llog-lincheck: could not draw the history: %v\n", err)
		}
	}
	if result == porcupine.Unknown {
		os.Exit(2)
	}
	os.Exit(1)
}
