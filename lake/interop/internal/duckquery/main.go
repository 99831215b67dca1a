// Command duckquery runs SQL in an in-memory DuckDB with one thread (`SET
// threads = 1`), as an analyst's DuckDB session would, and prints the last
// statement's rows tab-separated: each argument is one statement, every
// one but the last executed for its effect. Columns print as Go formats
// them, timestamps as Unix microseconds. It is BenchmarkLakeQueryProcess's
// DuckDB process: nothing but database/sql and the DuckDB driver, so its
// memory is DuckDB's.
//
//	duckquery "SET TimeZone = 'UTC'" "SELECT …"
package main

import (
	"bufio"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "duckquery:", err)
		os.Exit(1)
	}
}

func run(stmts []string) error {
	if len(stmts) == 0 {
		return errors.New("usage: duckquery STATEMENT…")
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // SET applies to the connection
	if _, err := db.Exec("SET threads = 1"); err != nil {
		return err
	}
	for _, st := range stmts[:len(stmts)-1] {
		if _, err := db.Exec(st); err != nil {
			return fmt.Errorf("%s: %w", st, err)
		}
	}
	rows, err := db.Query(stmts[len(stmts)-1])
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	vals, ptrs := make([]any, len(cols)), make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	w := bufio.NewWriter(os.Stdout)
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		for i, v := range vals {
			if i > 0 {
				w.WriteByte('\t')
			}
			switch v := v.(type) {
			case time.Time:
				w.WriteString(strconv.FormatInt(v.UnixMicro(), 10))
			case float64:
				w.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
			default:
				fmt.Fprint(w, v)
			}
		}
		w.WriteByte('\n')
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return w.Flush()
}
