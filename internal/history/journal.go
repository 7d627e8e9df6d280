package history

import (
	"errors"
	"fmt"

	"github.com/kira-scheduler/kira/internal/shard"
	"google.golang.org/protobuf/encoding/protowire"
)

// A journal entry is one key of a member's journal (keyspace.JournalEntry)
// holding the records of one fenced transaction of that member, for many
// slots: the transaction compares every slot's leader key, as when each
// record had a key of its own, but etcd indexes and stores one key, not one
// per record (docs/decisions/0013-records-share-a-key.md). Its value is
// journalPrefix, then one field 1 per item: 1 job, 2 partition, 3 the record
// in the wire format (without wirePrefix), its member left out when it is
// the journal's. TestJournalEntryRoundTrip.
const journalPrefix = 'j'

// JournalItem is one record of a journal entry, with its slot.
type JournalItem struct {
	Slot   shard.Slot
	Stored Stored // its Seq set
}

// Journaled reports whether s can go in a journal: records without a
// scheduled time (which the compact forms count from) cannot.
func Journaled(s Stored) bool { return !s.ScheduledTime.IsZero() && s.Seq != nil }

// EncodeJournal is the value of a journal entry of member holding items,
// each Journaled.
func EncodeJournal(member string, items []JournalItem) []byte {
	b := []byte{journalPrefix}
	var item []byte
	for _, it := range items {
		c := toCompact(it.Stored)
		if c.Member == member {
			c.Member = ""
		}
		item = appendString(item[:0], 1, it.Slot.Job)
		item = appendInt(item, 2, int64(it.Slot.Partition))
		item = protowire.AppendTag(item, 3, protowire.BytesType)
		item = protowire.AppendBytes(item, appendWire(nil, c))
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, item)
	}
	return b
}

// IsJournal reports whether value is a journal entry's.
func IsJournal(value []byte) bool { return len(value) > 0 && value[0] == journalPrefix }

// DecodeJournal reads the items of a journal entry of member.
func DecodeJournal(member string, value []byte) ([]JournalItem, error) {
	encoded, err := SplitJournal(value)
	if err != nil {
		return nil, fmt.Errorf("history: a journal entry of %s: %w", member, err)
	}
	items := make([]JournalItem, len(encoded))
	for i, e := range encoded {
		st, err := e.Decode(member)
		if err != nil {
			return nil, fmt.Errorf("history: a journal entry of %s: %w", member, err)
		}
		items[i] = JournalItem{Slot: e.Slot, Stored: st}
	}
	return items, nil
}

// EncodedItem is one record of a journal entry with its slot read and the
// record itself not yet decoded: a reader that wants a few slots' records
// of many entries decodes only theirs (journal.Cache).
type EncodedItem struct {
	Slot   shard.Slot
	record []byte // a part of the entry's value
}

// SplitJournal reads the slot of each item of a journal entry, leaving
// each record encoded; the items share value's bytes.
func SplitJournal(value []byte) ([]EncodedItem, error) {
	if !IsJournal(value) {
		return nil, errors.New("not a journal entry")
	}
	var items []EncodedItem
	err := readWire(value[1:], func(f wireField) error {
		if f.num != 1 {
			return nil
		}
		if f.isInt {
			return errWireType
		}
		it, err := splitJournalItem(f.bytes)
		items = append(items, it)
		return err
	})
	return items, err
}

func splitJournalItem(b []byte) (EncodedItem, error) {
	var it EncodedItem
	err := readWire(b, func(f wireField) error {
		switch f.num {
		case 1, 3:
			if f.isInt {
				return errWireType
			}
			if f.num == 1 {
				it.Slot.Job = string(f.bytes)
			} else {
				it.record = f.bytes
			}
		case 2:
			if !f.isInt {
				return errWireType
			}
			it.Slot.Partition = int(f.v)
		}
		return nil
	})
	if err == nil && (it.Slot.Job == "" || it.record == nil) {
		err = errors.New("a journal item without its job or record")
	}
	return it, err
}

// Decode reads the record of e, an item of a journal entry of member.
func (e EncodedItem) Decode(member string) (Stored, error) {
	c, err := decodeWire(e.record)
	if err != nil {
		return Stored{}, err
	}
	if c.Member == "" {
		c.Member = member
	}
	if c.Seq == nil {
		return Stored{}, errors.New("a journal item without its seq")
	}
	return fromCompact(e.Slot, c)
}
