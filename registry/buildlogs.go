package registry

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// LogLine is one line of a build's log.
type LogLine struct {
	BuildID   string `gorm:"primaryKey"`
	Seq       int    `gorm:"primaryKey"`
	Step      string
	Line      string
	CreatedAt time.Time
}

// TableName names the table of LogLine.
func (LogLine) TableName() string { return "build_logs" }

// BuildLogs keeps build log lines in the database, where every process can follow them.
type BuildLogs struct {
	db *gorm.DB
}

// NewBuildLogs returns the build log store over db.
func NewBuildLogs(db *gorm.DB) *BuildLogs { return &BuildLogs{db: db} }

// Append adds a line after the build's last one. A build's lines come from one worker at a time.
func (s *BuildLogs) Append(ctx context.Context, buildID, step, line string) error {
	return appendLog(s.db.WithContext(ctx), buildID, step, line)
}

// appendLog adds a line after the build's last one on db (a transaction or not).
func appendLog(db *gorm.DB, buildID, step, line string) error {
	err := db.Exec(
		`INSERT INTO build_logs (build_id, seq, step, line, created_at)
		 SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ? FROM build_logs WHERE build_id = ?`,
		buildID, step, line, time.Now().UTC(), buildID).Error
	if err != nil {
		return fmt.Errorf("append build log: %w", err)
	}
	return nil
}

// Last returns the build's last line; a build with none gives the zero LogLine.
func (s *BuildLogs) Last(ctx context.Context, buildID string) (LogLine, error) {
	var lines []LogLine
	if err := s.db.WithContext(ctx).Where("build_id = ?", buildID).Order("seq DESC").Limit(1).Find(&lines).Error; err != nil {
		return LogLine{}, fmt.Errorf("read build log: %w", err)
	}
	if len(lines) == 0 {
		return LogLine{}, nil
	}
	return lines[0], nil
}

// After returns the build's lines with seq greater than after, in order, at most limit (0: 1000).
func (s *BuildLogs) After(ctx context.Context, buildID string, after, limit int) ([]LogLine, error) {
	if limit <= 0 {
		limit = 1000
	}
	var lines []LogLine
	err := s.db.WithContext(ctx).Where("build_id = ? AND seq > ?", buildID, after).Order("seq").Limit(limit).Find(&lines).Error
	if err != nil {
		return nil, fmt.Errorf("read build log: %w", err)
	}
	return lines, nil
}
