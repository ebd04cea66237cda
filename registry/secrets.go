package registry

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"regexp"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// ErrDecrypt means a stored ciphertext cannot be opened with the key: the key changed, or the
// row was tampered with or moved to another agent or name.
var ErrDecrypt = errors.New("registry: cannot decrypt stored secret (wrong key or tampered row)")

// Secret limits.
const (
	SecretKeySize  = 32       // bytes of the AES-256 key
	MaxSecretSize  = 64 << 10 // bytes of a secret value
	MaxSecretName  = 128      // characters of a secret name
	cipherVersion1 = 1
)

var secretNamePattern = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// ValidateSecretName reports whether name is a valid secret name: [A-Z_][A-Z0-9_]*, at most
// MaxSecretName characters (the shape of an environment variable, so env:NAME can name it).
func ValidateSecretName(name string) error {
	switch {
	case name == "":
		return invalid("name", "is empty")
	case len(name) > MaxSecretName:
		return invalid("name", "is longer than %d characters", MaxSecretName)
	case !secretNamePattern.MatchString(name):
		return invalid("name", "must match [A-Z_][A-Z0-9_]*")
	}
	return nil
}

// Cipher seals values at rest with AES-256-GCM. Every value is bound to a binding string (its
// agent and name, or its purpose) used as additional data, so a ciphertext copied to another row
// does not open.
// A Cipher is safe for concurrent use.
type Cipher struct {
	aead cipher.AEAD
}

// NewCipher returns a cipher for key, which must be exactly SecretKeySize bytes.
func NewCipher(key []byte) (*Cipher, error) {
	if len(key) != SecretKeySize {
		return nil, fmt.Errorf("registry: secret key must be %d bytes, got %d", SecretKeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("new cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("new cipher: %w", err)
	}
	return &Cipher{aead: aead}, nil
}

// Seal encrypts plaintext bound to binding (which Open must be given again): version byte,
// random nonce, then the sealed bytes.
func (c *Cipher) Seal(plaintext []byte, binding string) []byte {
	out := make([]byte, 1+c.aead.NonceSize(), 1+c.aead.NonceSize()+len(plaintext)+c.aead.Overhead())
	out[0] = cipherVersion1
	_, _ = rand.Read(out[1:]) // crypto/rand.Read never returns an error
	return c.aead.Seal(out, out[1:], plaintext, []byte(binding))
}

// Open decrypts what Seal made with the same binding; anything else is ErrDecrypt.
func (c *Cipher) Open(sealed []byte, binding string) ([]byte, error) {
	n := c.aead.NonceSize()
	if len(sealed) < 1+n+c.aead.Overhead() || sealed[0] != cipherVersion1 {
		return nil, ErrDecrypt
	}
	plain, err := c.aead.Open(nil, sealed[1:1+n], sealed[1+n:], []byte(binding))
	if err != nil {
		return nil, ErrDecrypt
	}
	return plain, nil
}

// secretRow is a secret as stored: never its value in clear.
type secretRow struct {
	AgentID    string `gorm:"primaryKey"`
	Name       string `gorm:"primaryKey"`
	Ciphertext []byte
	UpdatedAt  time.Time
}

// TableName names the table of secretRow.
func (secretRow) TableName() string { return "secrets" }

// Secrets stores per-agent secret values, encrypted with a Cipher. Values can be resolved by
// name (builds and runtimes resolve env:NAME here first) but are never listed: List shows
// names and times only. Safe for
// concurrent use.
type Secrets struct {
	db     *gorm.DB
	cipher *Cipher
}

// NewSecrets returns the secret store over db, sealing values with c.
func NewSecrets(db *gorm.DB, c *Cipher) *Secrets { return &Secrets{db: db, cipher: c} }

func secretContext(agentID, name string) string { return "svc/secret\x00" + agentID + "\x00" + name }

// Put sets the secret name of agentID to value, replacing any earlier value. A name that breaks
// ValidateSecretName or a value over MaxSecretSize bytes is an *InvalidError; an unknown agent
// is ErrAgentNotFound.
func (s *Secrets) Put(ctx context.Context, agentID, name, value string) error {
	if err := ValidateSecretName(name); err != nil {
		return err
	}
	if len(value) > MaxSecretSize {
		return invalid("value", "is longer than %d bytes", MaxSecretSize)
	}
	row := secretRow{
		AgentID: agentID, Name: name, UpdatedAt: time.Now().UTC(),
		Ciphertext: s.cipher.Seal([]byte(value), secretContext(agentID, name)),
	}
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "agent_id"}, {Name: "name"}},
		DoUpdates: clause.AssignmentColumns([]string{"ciphertext", "updated_at"}),
	}).Create(&row).Error
	if errors.Is(err, gorm.ErrForeignKeyViolated) {
		return ErrAgentNotFound
	}
	if err != nil {
		return fmt.Errorf("put secret: %w", err)
	}
	return nil
}

// Resolve returns the value of the secret name of agentID; ok is false when there is none.
// A row that does not decrypt is ErrDecrypt.
func (s *Secrets) Resolve(ctx context.Context, agentID, name string) (value string, ok bool, err error) {
	var row secretRow
	err = s.db.WithContext(ctx).Where("agent_id = ? AND name = ?", agentID, name).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("resolve secret: %w", err)
	}
	plain, err := s.cipher.Open(row.Ciphertext, secretContext(agentID, name))
	if err != nil {
		return "", false, fmt.Errorf("resolve secret %s: %w", name, err)
	}
	return string(plain), true, nil
}

// SecretInfo is what may be shown of a secret: its name and when it was last set, never its
// value.
type SecretInfo struct {
	Name      string
	UpdatedAt time.Time
}

// List returns agentID's secrets by name, sorted, without their values.
func (s *Secrets) List(ctx context.Context, agentID string) ([]SecretInfo, error) {
	var rows []secretRow
	err := s.db.WithContext(ctx).Select("name", "updated_at").Where("agent_id = ?", agentID).Order("name").Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	out := make([]SecretInfo, len(rows))
	for i, r := range rows {
		out[i] = SecretInfo{Name: r.Name, UpdatedAt: r.UpdatedAt.UTC()}
	}
	return out, nil
}

// Delete removes the secret name of agentID; deleted is false when there was none.
func (s *Secrets) Delete(ctx context.Context, agentID, name string) (deleted bool, err error) {
	res := s.db.WithContext(ctx).Where("agent_id = ? AND name = ?", agentID, name).Delete(&secretRow{})
	if res.Error != nil {
		return false, fmt.Errorf("delete secret: %w", res.Error)
	}
	return res.RowsAffected > 0, nil
}
